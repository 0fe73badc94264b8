"""Recognising a GAN's adversarial loss pair by key names (trackerhealth.adversarial)."""

import pytest

from trackerhealth import adversarial


@pytest.mark.parametrize("key, side", [
    ("loss_gen", "generator"), ("G_loss", "generator"), ("Gen Loss", "generator"), ("errG", "generator"),
    ("lossG", "generator"), ("train_gen_loss", "generator"), ("Generator loss", "generator"), ("loss_G_adv", "generator"),
    ("loss_dis", "discriminator"), ("D_loss", "discriminator"), ("critic_loss", "discriminator"), ("errD", "discriminator"),
    ("Discriminator loss", "discriminator"), ("train_disc_loss", "discriminator"),
    ("gan_loss", "generator"), ("disc_real_loss", "discriminator"), ("d_gan_loss", None),
    ("train/loss", None), ("val_loss", None), ("grad_norm", None), ("loss_kd", None), ("lossG+lossD", None), ("gen_len", None),
])
def test_a_loss_key_names_its_side(key, side):
    assert adversarial.side(key) == side


def test_only_a_pair_is_adversarial():
    assert adversarial.counterpart("loss_gen", ["loss_gen", "loss_dis", "epoch"]) == "loss_dis"
    assert adversarial.counterpart("D_loss", ["G_loss", "D_loss"]) == "G_loss"
    # Keras' DCGAN recipe: the generator trained through a combined model named "gan" (public log P635).
    assert adversarial.counterpart("gan_loss", ["disc_fake_loss", "disc_real_loss", "gan_loss", "mean_disc_loss"]) == "disc_fake_loss"
    # One key that ends in _d (a depth loss beside others) is no GAN; nor are two of the same side.
    assert adversarial.counterpart("loss_d", ["loss_d", "loss_rgb", "loss"]) is None
    assert adversarial.counterpart("loss_G_adv", ["loss_G_adv", "loss_G_l1"]) is None
    assert adversarial.counterpart(None, ["loss_gen", "loss_dis"]) is None
