"""The job's metrics on the driver: the store, its published snapshots, JSON and Prometheus."""
