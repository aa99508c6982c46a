"""Answer quality without references: PPLqa, GPTScore, G-Eval, and their meta-evaluation."""
