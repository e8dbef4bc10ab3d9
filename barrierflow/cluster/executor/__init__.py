"""What runs on Spark's executors: the task entry point, its supervised child, its logs."""
