"""The job's HTTP API: routes declared once, the dispatcher, OpenAPI, the dashboard's files."""
