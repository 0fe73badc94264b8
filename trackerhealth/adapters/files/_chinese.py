"""Printed training logs in Chinese: their metric words and full-width punctuation, in the words the
text-log reader knows.

Chinese training scripts print the same lines as English ones with Chinese names —
``当前Batch：10/6035 | 当前epoch:0/50 | 当前损失值：10.113 | 当前准确率：0.00%`` (batch, epoch, loss,
accuracy), ``第3轮 训练损失：0.52，验证损失：0.61`` (epoch 3, train loss, val loss) — often with
full-width colons and commas, and often saved in GBK (Windows' Chinese code page). The text is
rewritten word for word (``训练损失`` -> `` train loss ``), and whatever Chinese is left (prose:
``模型训练开始``) becomes a space, so the name-number pairs the reader finds are the same as in an
English log. ASCII text is returned as it is; nothing here crosses a line end. (Decoding GBK bytes is :mod:`._encoding`'s.)
"""

from __future__ import annotations

import re

# Full-width punctuation a Chinese input method types, as its ASCII twin.
_FULL_WIDTH = str.maketrans({"：": ":", "，": ",", "；": ";", "｜": "|", "（": "(", "）": ")", "【": "[", "】": "]",
                             "［": "[", "］": "]", "／": "/", "＝": "=", "％": "%", "　": " "})

# "第3轮" (the 3rd round: epoch 3), "第120步" / "第120次迭代" (step 120), "第2个epoch".
_ORDINAL = re.compile(r"第[^\S\r\n]*(\d+)[^\S\r\n]*(?:个[^\S\r\n]*)?(轮|epoch|步|次迭代|次|iter|批)", re.IGNORECASE)
_ORDINAL_WORD = {"轮": "epoch", "epoch": "epoch", "步": "step", "次迭代": "iter", "次": "iter", "iter": "iter", "批": "batch"}

# Metric words, longest first so that 损失值 wins over 损失. 当前 ("current") and 平均 ("mean") qualify a
# name; the first says nothing and goes, the second is kept as the aggregate it is.
_WORDS = (
    ("损失函数值", "loss"), ("损失函数", "loss"), ("损失值", "loss"), ("损失", "loss"), ("误差", "loss"),
    ("训练集", "train"), ("验证集", "val"), ("测试集", "test"), ("训练", "train"), ("验证", "val"), ("测试", "test"),
    ("准确率", "accuracy"), ("正确率", "accuracy"), ("学习率", "lr"), ("梯度范数", "grad_norm"),
    ("步数", "step"), ("迭代次数", "iter"), ("迭代", "iter"), ("批次", "batch"), ("轮次", "epoch"), ("轮数", "epoch"),
    ("平均", "mean"), ("耗时", "time"), ("用时", "time"), ("当前", ""),
)
_WORD = re.compile("|".join(re.escape(zh) for zh, _ in _WORDS))
_ENGLISH = dict(_WORDS)
# Whatever CJK is left: ideographs, CJK punctuation, full-width forms.
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]+")


def in_reader_words(text: str) -> str:
    """``text`` with its Chinese metric words in English and the rest of its Chinese blanked, line ends kept."""
    if text.isascii():
        return text
    text = text.translate(_FULL_WIDTH)
    text = _ORDINAL.sub(lambda m: f" {_ORDINAL_WORD[m.group(2).lower()]} {m.group(1)} ", text)
    text = _WORD.sub(lambda m: f" {_ENGLISH[m.group(0)]} ", text)
    return _CJK.sub(" ", text)


__all__ = ["in_reader_words"]
