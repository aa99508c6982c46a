"""L-Eval answer evaluation: prediction files, per-task scores, length instructions, correlation with humans."""
