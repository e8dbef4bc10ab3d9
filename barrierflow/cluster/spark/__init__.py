"""Spark: the session a job runs on, the barrier stages of its attempts, the Java it needs."""
