"""The stream task's stdout forwarder (cluster/executor/task_console.py), write by write: what
leaves for the driver, when, and in which order; no Spark."""

from __future__ import annotations

import io
import sys
import threading

from barrierflow.cluster.executor import task_console
from barrierflow.cluster.executor.task_console import (
    ConsoleForwarder,
    forwarding_task_console,
    print_task_output,
)
from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.print_sink import PrintSink
from barrierflow.runtime.task_messages import TASK_TO_JOBMASTER, TaskConsoleOutput


def forwarder(sent: list) -> ConsoleForwarder:
    return ConsoleForwarder(3, lambda: 7, sent.append)


# (step, argument, texts sent after the step)
SCENARIO = [
    ("write", "1> a", []),  # nothing while a line is being written
    ("send_lines", None, []),  # the timer sends whole lines only
    ("write", "\n", []),
    ("write", "1> b\n2> c", []),
    ("send_lines", None, ["1> a\n1> b\n"]),  # whole lines; "2> c" waits
    ("write", "\n", []),
    ("send_lines", None, ["2> c\n"]),
    ("send_lines", None, []),  # nothing new: nothing sent
    ("write", "tail", []),
    ("flush", None, ["tail"]),  # an explicit flush (a checkpoint, close) sends it all
]


def test_whole_lines_leave_on_the_timer_and_everything_on_flush():
    sent: list[TaskConsoleOutput] = []
    out = forwarder(sent)
    for step, argument, expected in SCENARIO:
        before = len(sent)
        getattr(out, step)(*(() if argument is None else (argument,)))
        assert [m.text for m in sent[before:]] == expected, (step, argument)
    assert {(m.attempt, m.partition) for m in sent} == {(7, 3)}


def test_a_full_buffer_is_sent_by_the_writer_so_memory_stays_bounded(monkeypatch):
    monkeypatch.setattr(task_console, "BATCH_CHARS", 10)
    sent: list[TaskConsoleOutput] = []
    out = forwarder(sent)
    out.write("12345")
    assert sent == []
    out.write("67890ab")  # 12 characters wait: over the bound, sent at once, even mid-line
    assert [m.text for m in sent] == ["1234567890ab"]


def test_lines_of_many_writers_stay_whole_and_in_each_writers_order():
    sent: list[TaskConsoleOutput] = []
    out = forwarder(sent)

    def write(name: str) -> None:
        for i in range(500):
            out.write(f"{name} {i}\n")

    threads = [threading.Thread(target=write, args=(name,)) for name in "xyz"]
    for thread in threads:
        thread.start()
    for _ in range(50):
        out.send_lines()
    for thread in threads:
        thread.join()
    out.flush()
    lines = "".join(m.text for m in sent).splitlines()
    for name in "xyz":
        assert [line for line in lines if line.startswith(name)] == [
            f"{name} {i}" for i in range(500)
        ]


def test_a_print_sink_in_a_task_process_reaches_the_driver_console(capsys):
    """The path end to end but for the RPC link: sink -> forwarder -> message -> console."""
    assert TaskConsoleOutput in TASK_TO_JOBMASTER  # the JobMaster accepts the message
    sent: list[TaskConsoleOutput] = []
    with forwarding_task_console(1, lambda: 0, sent.append):
        writer = PrintSink("out").create_writer(SinkContext("print", 1, 2, 0, "run1-0"))
        writer.write_batch([("a", 1), "b"])
        writer.close()
        assert sys.stdout is not sys.__stdout__
    capsys.readouterr()
    for message in sent:
        print_task_output(message)
    assert capsys.readouterr().out == "out:2> ('a', 1)\nout:2> b\n"


def test_the_driver_side_survives_a_closed_console(monkeypatch):
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stdout", closed)
    print_task_output(TaskConsoleOutput(0, 0, "lost\n"))  # no error: the job goes on


def test_a_library_asking_for_stdouts_descriptor_gets_the_process_one():
    previous = sys.stdout
    with forwarding_task_console(0, lambda: 0, [].append) as forwarder:
        assert forwarder.fileno() == previous.fileno()
    assert sys.stdout is previous
