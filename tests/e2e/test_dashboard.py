"""The web dashboard in headless Chromium against a running job: its graph and a completed
checkpoint appear, a savepoint asked for without the token is refused, and one triggered
with the token from the URL fragment is listed with its path.

The test saves a screenshot into its tmp_path; to regenerate the one in the docs, run it
with `BARRIERFLOW_DASHBOARD_SCREENSHOT=docs/images/dashboard.png`.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest

from barrierflow.cluster.registry import JobRegistry
from barrierflow.errors import JobExecutionError

from .jobs import paced_word_count

pytestmark = pytest.mark.spark

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOT_VARIABLE = "BARRIERFLOW_DASHBOARD_SCREENSHOT"
WAIT_S = 30


@pytest.fixture
def browser():
    """Headless Chromium through its chromedriver, both from the distribution's packages."""
    lacking = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if lacking:
        pytest.fail(
            f"the dashboard test needs {' and '.join(lacking)}: run scripts/bootstrap as root "
            "(it installs the chromium and chromium-driver packages)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1440,2200",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def chart_points(browser) -> int:
    """The most points of any line of the throughput chart."""
    from selenium.webdriver.common.by import By

    lines = browser.find_elements(By.CSS_SELECTOR, "#chart-throughput polyline")
    return max((len((line.get_attribute("points") or "").split()) for line in lines), default=0)


@pytest.fixture
def registry(tmp_path, monkeypatch) -> JobRegistry:
    folder = tmp_path / "registry"
    monkeypatch.setenv("BARRIERFLOW_REGISTRY_DIR", str(folder))
    monkeypatch.delenv("BARRIERFLOW_REST_PORT", raising=False)
    return JobRegistry(folder)


def test_the_dashboard_shows_a_running_job_and_takes_a_savepoint(
    spark, tmp_path, registry, browser
):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def wait(condition, what: str):
        """`condition`'s first truthy value; the page redraws its tables every second, so an
        element read as it is replaced is looked up again."""
        return WebDriverWait(
            browser, WAIT_S, poll_frequency=0.2, ignored_exceptions=[StaleElementReferenceException]
        ).until(condition, f"the dashboard did not show {what} within {WAIT_S} s")

    def texts(b, css: str) -> list[str]:
        """The rendered text of every element `css` selects, read in one script: the page
        rebuilds its tables every second, and on a busy machine reading 50 rows one
        WebDriver call at a time outlasts that, so every attempt met a replaced row."""
        return b.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0]), e => e.innerText)", css
        )

    def testid(name: str) -> str:
        return f"[data-testid='{name}']"

    job = paced_word_count(tmp_path, 400_000, 2_000).execute_async("dashboard-job")
    try:
        assert job.wait_until_running(timeout=60)
        (entry,) = [e for e in registry.entries() if e.job_id == job.get_job_id()]
        assert entry.rest_url == job.rest_url
        browser.get(f"{job.rest_url}/")
        wait(lambda b: b.find_element(By.ID, "job-name").text == "dashboard-job", "the job")
        assert "No token" in browser.find_element(By.ID, "token-state").text
        browser.find_element(By.CSS_SELECTOR, testid("trigger-savepoint")).click()
        refused = wait(
            lambda b: b.find_element(By.ID, "action-result").text, "the tokenless refusal"
        )
        assert "refused" in refused and "HTTP 401" in refused, refused

        browser.get(f"{job.rest_url}/#token={entry.token}")
        wait(lambda b: "Token set" in b.find_element(By.ID, "token-state").text, "the token")
        assert "token" not in browser.current_url  # taken out of the address bar
        with urllib.request.urlopen(f"{job.rest_url}/jobs/{job.get_job_id()}", timeout=10) as r:
            spark_ui = json.loads(r.read()).get("spark_ui")
        assert browser.find_element(By.ID, "spark-ui").is_displayed() == bool(spark_ui)
        if spark_ui:
            assert browser.find_element(By.ID, "spark-ui-link").get_attribute("href") == spark_ui
        vertices = job.job_graph.vertices
        wait(
            lambda b: all(
                b.find_elements(By.CSS_SELECTOR, testid(f"vertex-{v.vertex_id}")) for v in vertices
            ),
            "every vertex of the graph",
        )
        graph = wait(
            lambda b: b.find_element(By.ID, "graph").get_attribute("textContent"), "the graph"
        )
        for vertex in vertices:
            assert vertex.name in graph
            assert f"parallelism {vertex.parallelism}" in graph

        # On a busy machine the first checkpoint may take longer than the page's wait: wait
        # for it through the client, then for the page to show it.
        assert job.wait_for_completed_checkpoints(1, timeout=120)
        completed = wait(
            lambda b: texts(b, "#checkpoint-history tr[data-status='COMPLETED'] th"),
            "a completed checkpoint",
        )
        assert completed[0].startswith("#")

        browser.find_element(By.CSS_SELECTOR, testid(f"vertex-{vertices[-1].vertex_id}")).click()
        wait(
            lambda b: b.find_elements(By.CSS_SELECTOR, "#subtasks " + testid("subtask-row-0")),
            "the subtasks of the selected vertex",
        )
        wait(
            lambda b: (
                "numRecordsIn" in b.find_element(By.ID, "operator-metrics").text
                and b.find_elements(By.CSS_SELECTOR, testid("operator-metric"))
            ),
            "the operators' metrics of the selected vertex",
        )

        browser.find_element(By.ID, "savepoint-dir").send_keys(str(tmp_path / "savepoints"))
        browser.find_element(By.CSS_SELECTOR, testid("trigger-savepoint")).click()
        path = wait(
            lambda b: "".join(
                e.text for e in b.find_elements(By.CSS_SELECTOR, testid("savepoint-path"))
            ),
            "the savepoint's path",
        )
        folder = Path(path.removeprefix("file://"))
        assert folder.parent == tmp_path / "savepoints"
        assert (folder / "_metadata").is_file()
        wait(
            lambda b: any(
                path in item.text
                for item in b.find_elements(By.CSS_SELECTOR, "#savepoints li[data-status]")
            ),
            "the savepoint in the list of savepoints",
        )
        wait(
            lambda b: any(
                "savepoint" in row
                for row in texts(b, "#checkpoint-history tr[data-status='COMPLETED']")
            ),
            "the savepoint in the checkpoint history",
        )
        wait(
            lambda b: b.find_elements(By.CSS_SELECTOR, "#chart-throughput polyline"),
            "the throughput chart",
        )
        assert job.get_job_status() == "RUNNING"  # a savepoint leaves the job running
        script_errors = [
            entry["message"]
            for entry in browser.get_log("browser")
            if entry["level"] == "SEVERE" and entry.get("source") != "network"
        ]  # a 404 of a route the endpoint lacks, or the refused 401, is the network's
        assert script_errors == []
        assert browser.find_element(By.ID, "connection").get_attribute("class") == "ok"

        docs_image = os.environ.get(SCREENSHOT_VARIABLE)
        if docs_image:  # a picture worth looking at: charts with a few seconds of history
            wait(lambda b: chart_points(b) >= 12, "a dozen seconds of throughput")
        browser.execute_script("window.scrollTo(0, 0)")
        screenshot = tmp_path / "dashboard.png"
        assert browser.save_screenshot(str(screenshot))
        if docs_image:
            shutil.copyfile(screenshot, docs_image)
    finally:
        job.cancel()
    with pytest.raises(JobExecutionError, match="cancelled"):
        job.wait(timeout=60)
