"""Shadow mode: replay a history commit by commit, score it against what broke, plan promotions."""
