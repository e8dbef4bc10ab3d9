"""The OpenAPI description and the server stay in step: every route of `_ROUTES` (and
`/metrics`) is in the spec and nothing else, each with its path parameters, every schema
reference resolves, and the actions carry the bearer token."""

from __future__ import annotations

import json
import re

from barrierflow.cluster.rest import openapi
from barrierflow.cluster.rest.routes import DECLARED
from barrierflow.cluster.rest.server import _ROUTES, TOKEN_ROUTES, routes


def spec_operations(spec) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops}


def test_every_route_is_in_the_spec_and_every_path_of_the_spec_is_a_route():
    spec = openapi.openapi_spec("job-1")

    assert spec_operations(spec) == set(routes()) | openapi.EXTRA_PATHS
    assert len(routes()) == len(set(routes()))


def test_each_operation_declares_exactly_its_path_parameters():
    for path, operations in openapi.openapi_spec()["paths"].items():
        expected = set(re.findall(r"\{(\w+)\}", path))
        for method, operation in operations.items():
            declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert declared == expected, (method, path)


def test_every_schema_reference_resolves():
    spec = openapi.openapi_spec()
    text = json.dumps(spec)
    names = set(re.findall(r'"#/components/schemas/(\w+)"', text))
    assert names and names <= set(spec["components"]["schemas"])


def test_the_actions_logs_and_exceptions_need_the_bearer_token_and_other_reads_do_not():
    spec = openapi.openapi_spec()
    assert spec["components"]["securitySchemes"]["jobToken"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "the job's token from the local job registry",
    }
    for route in _ROUTES:
        operation = spec["paths"][route.template][route.method.lower()]
        if route.method == "GET" and route.template not in TOKEN_ROUTES:
            assert "security" not in operation
        else:
            assert operation["security"] == [{"jobToken": []}]
            assert {"401", "403"} <= set(operation["responses"])


def test_the_spec_is_a_valid_openapi_document():
    import schemathesis

    schema = schemathesis.openapi.from_dict(openapi.openapi_spec("job-1"))
    assert len(list(schema.get_all_operations())) == len(spec_operations(schema.raw_schema))


def test_every_declared_route_is_in_the_spec_and_the_dispatcher_and_nothing_else_is():
    declared = {(r.method, r.template) for r in DECLARED}
    dispatched = {(r.method, r.template) for r in _ROUTES}
    spec = spec_operations(openapi.openapi_spec())

    assert len(declared) == len(DECLARED)
    assert spec == declared
    assert dispatched == {(r.method, r.template) for r in DECLARED if r.in_table}
    assert declared - dispatched == openapi.EXTRA_PATHS == {("GET", "/metrics")}
    operations = spec_operations_by_key(openapi.openapi_spec())
    for r in DECLARED:
        operation = operations[(r.method, r.template)]
        assert operation["summary"] == r.summary
        assert str(r.response.status) in operation["responses"]


def spec_operations_by_key(spec) -> dict[tuple[str, str], dict]:
    return {(m.upper(), p): op for p, ops in spec["paths"].items() for m, op in ops.items()}


def test_a_jobs_state_is_an_enum_of_the_job_statuses_and_the_bodies_keep_to_it():
    """`state` (a job's bodies) and `status` (the job list) name JobStatus's values, so a
    client generated from the spec gets an enum; every status's body validates, other
    text does not."""
    import jsonschema

    from barrierflow.checkpoint.stats import CheckpointStatsTracker
    from barrierflow.cluster.jobmaster.views import JobStatus, JobView
    from barrierflow.cluster.rest.bodies import job_overview_json

    schemas = openapi.openapi_spec()["components"]["schemas"]
    statuses = [status.value for status in JobStatus]
    assert schemas["JobOverview"]["properties"]["state"] == {"type": "string", "enum": statuses}
    listed = schemas["JobIds"]["properties"]["jobs"]["items"]["properties"]["status"]
    assert listed == {"type": "string", "enum": statuses}
    overview = jsonschema.Draft4Validator(schemas["JobOverview"])
    for status in JobStatus:
        view = JobView(
            "j1", "job", status, 1, 1_000, 2_000, (), CheckpointStatsTracker(()).snapshot()
        )
        overview.validate(json.loads(json.dumps(job_overview_json(view))))
    body = json.loads(json.dumps(job_overview_json(view)))
    assert not overview.is_valid({**body, "state": "running"})
