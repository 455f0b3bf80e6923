"""evaluation, above run: perplexity protocols and lm-eval (evaluate.py), the native packed engine
(native.py), lm-eval task YAMLs (tasks/)."""
