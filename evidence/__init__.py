"""Evidence the diagnoses are judged on: trained torch runs (``torch/``) and labelled public logs (``public/``)."""
