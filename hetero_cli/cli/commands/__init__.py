"""hetero-cli's commands, one module each: classify, benchmark, query and devices."""
