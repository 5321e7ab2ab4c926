"""The routing evaluation set and its tools: cards, messages, the split, the fit, the report."""
