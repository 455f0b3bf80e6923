"""The pre-registered studies of fixed models (docs/results.md): ``base`` (a study's design, its run
look by look, its report), ``study2`` (study 2's models, contrasts and claim S1), ``study2_cheap``
(study 2's claims S2-S4: Ghosted's calibration, perplexity over windows), ``study3`` (study 3's
models from its pilot, its N, its perplexity stage). The bench/ scripts of the same names are their
command lines."""
