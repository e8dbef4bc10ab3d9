"""The dashboard's static files: the page at "/", its files under "/dashboard/" with their
content types, and a JSON 404 for anything outside the folder, however the path is spelt."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest

from barrierflow.cluster.rest.dashboard_files import DASHBOARD_FOLDER, static_answer
from barrierflow.cluster.rest.server import RestServer

OUTSIDE = [
    "/dashboard/../server.py",
    "/dashboard/%2e%2e/server.py",
    "/dashboard/..%2fserver.py",
    "/dashboard/%2e%2e%2f%2e%2e%2fpyproject.toml",
    "/dashboard/..",
    "/dashboard/",
    "/dashboard/./index.html",
    "/dashboard//etc/passwd",
    "/dashboard/%2fetc%2fpasswd",
    "/dashboard/__init__.py",
    "/dashboard/nothing.js",
    "/dashboard/index.html%00.js",
    "/dashboard/app.js/",
]


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/", "text/html; charset=utf-8"),
        ("/index.html", "text/html; charset=utf-8"),
        ("/?x=1", "text/html; charset=utf-8"),
        ("/dashboard/index.html", "text/html; charset=utf-8"),
        ("/dashboard/app.js", "text/javascript; charset=utf-8"),
        ("/dashboard/style.css", "text/css; charset=utf-8"),
        ("/dashboard/app.js?v=2", "text/javascript; charset=utf-8"),
        ("/dashboard/favicon.svg", "image/svg+xml"),
    ],
)
def test_each_file_of_the_folder_is_served_with_its_content_type(path, content_type):
    found = static_answer(path)
    assert found is not None
    assert (found.status, found.content_type) == (200, content_type)
    name = path.split("?")[0].rsplit("/", 1)[-1] or "index.html"
    assert found.body == (DASHBOARD_FOLDER / name).read_bytes()


@pytest.mark.parametrize("path", OUTSIDE)
def test_a_path_outside_the_folder_or_unknown_is_a_json_404(path):
    found = static_answer(path)
    assert found is not None
    assert found.status == 404
    assert found.content_type == "application/json; charset=utf-8"
    assert json.loads(found.body)["errors"][0].startswith("not found")


def test_other_paths_are_left_to_the_json_routes():
    assert static_answer("/jobs") is None
    assert static_answer("/jobs/4f1c/checkpoints") is None
    assert static_answer("/metrics") is None
    assert static_answer("/dashboardx/app.js") is None


def test_a_file_of_a_kind_not_served_or_a_link_out_of_the_folder_is_refused(tmp_path: Path):
    folder = tmp_path / "dashboard"
    folder.mkdir()
    (folder / "app.js").write_text("ok")
    (folder / "notes.txt").write_text("not a page's file")
    (tmp_path / "secret.js").write_text("outside")
    (folder / "linked.js").symlink_to(tmp_path / "secret.js")
    (folder / "sub").mkdir()
    (folder / "sub" / "x.js").write_text("in a sub-folder")

    assert static_answer("/dashboard/app.js", folder).body == b"ok"
    for name in ("notes.txt", "linked.js", "sub", "sub/x.js", "sub%2fx.js"):
        assert static_answer(f"/dashboard/{name}", folder).status == 404, name
    assert static_answer("/", folder).status == 404  # no index.html in that folder


def test_every_file_of_the_package_folder_is_of_a_served_kind():
    """The folder ships as package data: a file the server would refuse has no place in it."""
    names = sorted(p.name for p in DASHBOARD_FOLDER.iterdir())
    assert {"index.html", "app.js", "style.css"} <= set(names)
    for name in names:
        assert static_answer(f"/dashboard/{name}").status == 200, name


def raw_get(server: RestServer, path: str, method: str = "GET") -> http.client.HTTPResponse:
    """Sends `path` exactly as written (urllib would not let `..` through unchanged)."""
    host, port = server.address
    connection = http.client.HTTPConnection(host, port, timeout=10)
    connection.request(method, path)
    response = connection.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    connection.close()
    return response


def test_the_rest_server_serves_the_page_even_before_the_job_is_published():
    server = RestServer("127.0.0.1", 0, lambda: None)
    try:
        page = raw_get(server, "/")
        assert page.status == 200
        assert page.headers["Content-Type"] == "text/html; charset=utf-8"
        assert "default-src 'self'" in page.headers["Content-Security-Policy"]
        assert b'src="/dashboard/app.js"' in page.body
        script = raw_get(server, "/dashboard/app.js")
        assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
        assert int(script.headers["Content-Length"]) == len(script.body) > 0
        head = raw_get(server, "/dashboard/style.css", "HEAD")
        assert head.status == 200 and head.body == b""
        for path in ("/dashboard/../server.py", "/dashboard/%2e%2e/server.py", "/dashboard/x.js"):
            refused = raw_get(server, path)
            assert refused.status == 404, path
            assert refused.headers["Content-Type"] == "application/json; charset=utf-8"
            assert "errors" in json.loads(refused.body)
        assert raw_get(server, "/jobs").status == 503  # still the JSON routes' (no view yet)
        assert raw_get(server, "/", "POST").status == 405  # the page is only read
    finally:
        server.close()
