"""The main job behind ``make demo``: real Spark writers reproducing the conflict tables."""
