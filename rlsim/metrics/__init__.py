"""Statistics for repeated measurements (confidence intervals, ratios, significance tests) and figure set-up."""
