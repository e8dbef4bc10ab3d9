"""The job's log files over REST: the listing, a file's text and its tail, and every way of
reaching outside the log folder refused (dot-dot, slashes, encoded or not, absolute paths,
symlinks) with a JSON error."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from dataclasses import replace

import pytest
from test_rest import JOB_ID, job_view, tracker_with_checkpoints

from barrierflow.cluster.rest.actions import JobControl
from barrierflow.cluster.rest.server import RawBody, RestServer, route

TOKEN = "log-token"
CONTROL = JobControl(object(), TOKEN)  # type: ignore[arg-type]  # reads only: no action
AUTH = f"Bearer {TOKEN}"


def read(view, path):
    """A GET with the job's token (log routes need it)."""
    return route(view, path, authorization=AUTH, control=CONTROL)


@pytest.fixture
def log_dir(tmp_path):
    folder = tmp_path / "logs" / f"word-count-{JOB_ID}"
    folder.mkdir(parents=True)
    (folder / "jobmaster.log").write_text("".join(f"line {i}\n" for i in range(1, 6)))
    (folder / "task-1-0.log").write_text("task says hello\n")
    (tmp_path / "logs" / "secret.txt").write_text("not yours\n")
    (tmp_path / "secret.txt").write_text("not yours either\n")
    os.symlink(tmp_path / "secret.txt", folder / "escape.log")
    return folder


def view_of(folder):
    return replace(job_view(tracker_with_checkpoints()), log_dir=str(folder))


def test_the_listing_names_the_folders_regular_files_but_not_its_symlinks(log_dir):
    status, body = read(view_of(log_dir), f"/jobs/{JOB_ID}/logs")

    assert status == 200
    assert [(f["name"], f["size"]) for f in body["logs"]] == [
        ("jobmaster.log", 35),
        ("task-1-0.log", 16),
    ]
    assert all(f["mtime"] > 0 for f in body["logs"])


def test_a_folder_not_created_yet_lists_nothing(tmp_path):
    assert read(view_of(tmp_path / "none"), f"/jobs/{JOB_ID}/logs") == (200, {"logs": []})


def test_a_log_file_is_plain_text_and_tail_gives_its_last_lines(log_dir):
    status, body = read(view_of(log_dir), f"/jobs/{JOB_ID}/logs/jobmaster.log")
    assert status == 200 and isinstance(body, RawBody)
    assert body.content_type.startswith("text/plain")
    assert body.data.decode().splitlines()[0] == "line 1"

    tail = read(view_of(log_dir), f"/jobs/{JOB_ID}/logs/jobmaster.log?tail=2")[1]
    assert tail.data == b"line 4\nline 5\n"
    assert read(view_of(log_dir), f"/jobs/{JOB_ID}/logs/jobmaster.log?tail=0")[1].data == b""


@pytest.mark.parametrize("tail", ["-1", "x", "1.5", "99999999999", "²"])
def test_a_bad_tail_is_a_400(log_dir, tail):
    status, body = read(view_of(log_dir), f"/jobs/{JOB_ID}/logs/jobmaster.log?tail={tail}")
    assert status == 400 and "tail" in body["errors"][0]


@pytest.mark.parametrize(
    "name, status",
    [
        ("..", 400),
        ("%2e%2e", 400),
        (".hidden", 400),
        ("../secret.txt", 404),
        ("..%2fsecret.txt", 404),
        ("%2e%2e%2fsecret.txt", 404),
        ("%2e%2e%2f%2e%2e%2fsecret.txt", 404),
        ("..%5csecret.txt", 400),
        ("%2ftmp%2fsecret.txt", 404),
        ("escape.log", 404),
        ("missing.log", 404),
        ("jobmaster.log%00.txt", 400),
    ],
)
def test_nothing_outside_the_log_folder_is_served(log_dir, name, status):
    code, body = read(view_of(log_dir), f"/jobs/{JOB_ID}/logs/{name}")

    assert code == status
    assert list(body) == ["errors"]
    assert "not yours" not in str(body)


def test_without_a_log_folder_the_routes_say_so(log_dir):
    view = replace(view_of(log_dir), log_dir=None)
    assert read(view, f"/jobs/{JOB_ID}/logs") == (200, {"logs": []})
    assert read(view, f"/jobs/{JOB_ID}/logs/jobmaster.log")[0] == 404


def test_a_log_file_over_http_is_text_plain(log_dir):
    server = RestServer("127.0.0.1", 0, lambda: view_of(log_dir), CONTROL)
    try:
        url = f"{server.url}/jobs/{JOB_ID}/logs/task-1-0.log"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        assert refused.value.code == 401  # the job's token, or nothing
        request = urllib.request.Request(url, headers={"Authorization": AUTH})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
            assert response.read() == b"task says hello\n"
        escape = f"{server.url}/jobs/{JOB_ID}/logs/escape.log"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(escape, headers={"Authorization": AUTH}),
                                   timeout=10)  # fmt: skip
        assert refused.value.code == 404
        assert refused.value.headers["Content-Type"] == "application/json; charset=utf-8"
    finally:
        server.close()


@pytest.mark.parametrize("path", ["/logs", "/logs/jobmaster.log", "/exceptions"])
def test_logs_and_exceptions_need_the_jobs_token(log_dir, path):
    # issue 21: any GET served the logs and the exception history to whoever reached the port
    view = view_of(log_dir)
    assert route(view, f"/jobs/{JOB_ID}{path}", control=CONTROL)[0] == 401
    assert (
        route(view, f"/jobs/{JOB_ID}{path}", authorization="Bearer no", control=CONTROL)[0] == 403
    )
    assert route(view, f"/jobs/{JOB_ID}{path}")[0] == 403  # an endpoint without a token
    assert read(view, f"/jobs/{JOB_ID}{path}")[0] == 200
    assert route(view, f"/jobs/{JOB_ID}")[0] == 200  # the job's status stays open
