"""The repair-data warning (issue 36 item 4): under 6 tokens per channel, one line naming the setting,
once per process and size; the default (32 x 256) is quiet for SmolLM2's width (576)."""

from __future__ import annotations

import logging

from ghostsearch.config import load_config
from ghostsearch.recovery import repair


def test_small_repair_data_warns_once_naming_the_setting(caplog):
    repair._WARNED.clear()
    cfg = load_config(None, ["recovery.n_seq=8", "recovery.seq_len=128"])
    with caplog.at_level(logging.WARNING, logger="ghostsearch.recovery"):
        assert repair.check_repair_size(cfg, 576) is True
        assert repair.check_repair_size(cfg, 576) is True  # the same size again: no second line
    (rec,) = caplog.records
    msg = rec.getMessage()
    assert "recovery.n_seq x recovery.seq_len = 8 x 128 = 1,024" in msg and "under 3,456" in msg and "\n" not in msg


def test_default_repair_data_is_quiet_for_smollm2(caplog):
    repair._WARNED.clear()
    cfg = load_config(None, [])
    assert cfg.recovery.n_seq * cfg.recovery.seq_len == 8192
    with caplog.at_level(logging.WARNING, logger="ghostsearch.recovery"):
        assert repair.check_repair_size(cfg, 576) is False
        assert repair.check_repair_size(load_config(None, ["recovery.seq_len=128"]), 576) is False  # 4,096
        assert repair.check_repair_size(load_config(None, ["recovery.n_seq=16", "recovery.seq_len=128"]), 576)
    assert len(caplog.records) == 1  # 2,048 tokens: the documented overfit
