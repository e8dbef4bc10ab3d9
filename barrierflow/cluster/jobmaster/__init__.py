"""The JobMaster: a job's attempts, restarts, restores, savepoints, and the read models it
publishes (views.py)."""
