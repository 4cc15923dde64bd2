"""The main job behind ``make demo``: real Spark writers reproducing the seeds' tables."""
