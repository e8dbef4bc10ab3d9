"""The PyFlink names issue 24 left without a status (docs/porting.md's last 34 "not yet"),
through their public names, one scenario a row where the logic is pure; no Spark. What each
means here is in its module's docstring; the refused ones' errors are checked against the
page in tests/porting/test_porting_table.py."""

from __future__ import annotations

import pickle
from concurrent.futures import Future
from io import BytesIO

import pytest

import barrierflow.configuration
from barrierflow import (
    CheckpointStorage,
    CompletableFuture,
    ConfigOption,
    ConfigOptions,
    Configuration,
    EmbeddedRocksDBStateBackend,
    FileSystemCheckpointStorage,
    InputDependencyConstraint,
    JobID,
    JobManagerCheckpointStorage,
    MemorySize,
    PredefinedOptions,
    RestartStrategies,
    RestartStrategyConfiguration,
    SlotSharingGroup,
    StreamExecutionEnvironment,
    TypeSerializer,
)
from barrierflow.connectors.file_system import (
    FileCompactor,
    FileCompactStrategy,
    FileEnumeratorProvider,
    FileSource,
    FileSplitAssignerProvider,
    StreamFormat,
)
from barrierflow.connectors.kafka import DeliveryGuarantee, Semantic
from barrierflow.errors import ConfigurationError
from barrierflow.functions import AsyncFunctionDescriptor
from barrierflow.window import (
    CountWindow,
    CountWindowSerializer,
    GlobalWindow,
    GlobalWindowSerializer,
    TimeWindow,
    TimeWindowSerializer,
)

# -- checkpoint storage -> the checkpoint folder ---------------------------------------------

# (storage given to set_checkpoint_storage, folder configured before, folder after)
STORAGES = [
    (FileSystemCheckpointStorage("file:///data/chk"), "checkpoints", "file:///data/chk"),
    (FileSystemCheckpointStorage("/tmp/chk", 1024, 8192), "x", "/tmp/chk"),
    (JobManagerCheckpointStorage(), "from-the-command-line", "from-the-command-line"),
    (JobManagerCheckpointStorage("s3://bucket/chk"), "checkpoints", "s3://bucket/chk"),
    ("plain/path", "checkpoints", "plain/path"),
]


@pytest.mark.parametrize(("storage", "before", "after"), STORAGES)
def test_a_checkpoint_storage_names_the_checkpoint_folder(storage, before, after):
    config = StreamExecutionEnvironment.get_execution_environment().get_checkpoint_config()
    config.set_checkpoint_storage_dir(before)
    assert config.set_checkpoint_storage(storage) is config
    assert config.get_checkpoint_storage() == after


def test_checkpoint_storages_keep_pyflinks_getters():
    fs = FileSystemCheckpointStorage("/tmp/chk", file_state_size_threshold=4096)
    assert isinstance(fs, CheckpointStorage)
    assert (fs.get_checkpoint_path(), fs.get_min_file_size_threshold()) == ("/tmp/chk", 4096)
    assert fs.get_write_buffer_size() == 4096  # Flink's default for -1
    memory = JobManagerCheckpointStorage()
    assert (memory.get_checkpoint_path(), memory.get_max_state_size()) == (None, 5 * 1024 * 1024)


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: FileSystemCheckpointStorage(), "needs a checkpoint_path"),
        (lambda: FileSystemCheckpointStorage(""), "non-empty path"),
        (lambda: FileSystemCheckpointStorage("/x", 2 * 1024 * 1024), "file_state_size_threshold"),
        (lambda: JobManagerCheckpointStorage(max_state_size=0), "max_state_size must be positive"),
    ],
)
def test_a_bad_checkpoint_storage_is_one_line(build, words):
    with pytest.raises(ConfigurationError, match=words):
        build()


# -- MemorySize, SlotSharingGroup (values as PyFlink 2.3 prints and compares them) -----------

# (size, str as Flink prints it, bytes, KiB, MiB) — recorded from PyFlink 2.3's MemorySize
SIZES = [
    (MemorySize.of_mebi_bytes(64), "64 mb", 67108864, 65536, 64),
    (MemorySize(bytes_size=1536), "1536 bytes", 1536, 1, 0),
    (MemorySize(bytes_size=0), "0 bytes", 0, 0, 0),
    (MemorySize(bytes_size=3 * 1024**3), "3 gb", 3221225472, 3145728, 3072),
    (MemorySize(bytes_size=1023), "1023 bytes", 1023, 0, 0),
]


@pytest.mark.parametrize(("size", "text", "b", "kib", "mib"), SIZES)
def test_memory_size_prints_and_converts_as_flink(size, text, b, kib, mib):
    assert (str(size), size.get_bytes(), size.get_kibi_bytes(), size.get_mebi_bytes()) == (
        text,
        b,
        kib,
        mib,
    )


def test_memory_sizes_compare_by_bytes():
    small, large = MemorySize(bytes_size=5), MemorySize(bytes_size=6)
    assert small < large and small <= MemorySize(bytes_size=5) and small == MemorySize(bytes_size=5)
    with pytest.raises(ConfigurationError, match="bytes_size"):
        MemorySize(object())


def test_a_slot_sharing_group_checks_its_resources_as_flink_and_names_the_operator():
    group = SlotSharingGroup.builder("heavy").set_cpu_cores(1.5).set_task_heap_memory_mb(100)
    built = group.build()
    assert (built.get_name(), built.get_cpu_cores(), str(built.get_task_heap_memory())) == (
        "heavy",
        1.5,
        "100 mb",
    )
    assert str(built.get_managed_memory()) == "0 bytes"  # as PyFlink's, once resources are set
    assert SlotSharingGroup.builder("light").build().get_cpu_cores() is None
    with pytest.raises(ConfigurationError, match="cpu cores and task heap memory"):
        SlotSharingGroup.builder("half").set_cpu_cores(1.0).build()
    env = StreamExecutionEnvironment.get_execution_environment()
    stream = env.from_collection([1, 2]).map(lambda x: x).slot_sharing_group(built)
    assert stream._transformation.slot_sharing_group == "heavy"


# -- ConfigOption(s) with Configuration.set/get ----------------------------------------------

# (option, value set, text kept, value read back)
TYPED = [
    (ConfigOptions.key("a.int").int_type().default_value(1), 7, "7", 7),
    (ConfigOptions.key("a.long").long_type().no_default_value(), 2**40, "1099511627776", 2**40),
    (ConfigOptions.key("a.bool").boolean_type().default_value(False), True, "true", True),
    (ConfigOptions.key("a.double").double_type().default_value(0.5), 2.25, "2.25", 2.25),
    (ConfigOptions.key("a.str").string_type().no_default_value(), "x y", "x y", "x y"),
]


@pytest.mark.parametrize(("option", "value", "text", "read"), TYPED)
def test_a_typed_option_is_kept_as_flinks_text_and_read_back_typed(option, value, text, read):
    config = Configuration()
    assert config.get(option) == option.default_value()
    assert config.set(option, value) is config
    assert config.to_dict() == {option.key(): text}
    assert config.get(option) == read
    assert barrierflow.configuration.Configuration is Configuration


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        (ConfigOptions.key("p").int_type().default_value(1), "2", "p must be a 32-bit integer"),
        (ConfigOptions.key("p").int_type().default_value(1), 2**31, "32-bit integer"),
        (ConfigOptions.key("b").boolean_type().default_value(True), 1, "b must be true or false"),
        (ConfigOptions.key("s").string_type().no_default_value(), 3, "s must be a string"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_the_key(option, value, words):
    with pytest.raises(ConfigurationError, match=words):
        Configuration().set(option, value)


def test_a_stored_text_that_does_not_parse_names_the_key():
    option: ConfigOption[int] = ConfigOptions.key("parallelism").int_type().default_value(1)
    config = Configuration().set_string("parallelism", "two")
    with pytest.raises(ConfigurationError, match="parallelism must be a 32-bit integer"):
        config.get(option)
    with pytest.raises(ConfigurationError, match="x must be a 32-bit integer, got '1'"):
        ConfigOptions.key("x").int_type().default_value("1")


def test_a_typed_option_reaches_the_environment():
    option = ConfigOptions.key("parallelism.default").int_type().default_value(1)
    env = StreamExecutionEnvironment.get_execution_environment(Configuration().set(option, 3))
    assert env.get_parallelism() == 3


# -- PredefinedOptions -> RocksDB's settings --------------------------------------------------

# (profile, backend's settings before, block cache MiB and write buffers MiB after)
PROFILES = [
    (PredefinedOptions.DEFAULT, {}, (64, 32)),
    (PredefinedOptions.SPINNING_DISK_OPTIMIZED, {}, (64, 32)),
    (PredefinedOptions.FLASH_SSD_OPTIMIZED, {}, (64, 32)),
    (PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM, {}, (256, 256)),
    (PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM, {"write_buffer_mb": 16}, (256, 16)),
]


@pytest.mark.parametrize(("profile", "settings", "after"), PROFILES)
def test_a_rocksdb_profile_sets_the_memory_it_translates_to(profile, settings, after):
    from barrierflow.state.rocksdb_options import tuning

    backend = EmbeddedRocksDBStateBackend(**settings)
    assert backend.get_predefined_options() is PredefinedOptions.DEFAULT
    backend.set_predefined_options(profile)
    assert backend.get_predefined_options() is profile
    assert (backend.block_cache_mb, backend.write_buffer_mb) == after
    sent = pickle.loads(pickle.dumps(backend))  # as the tasks get it
    assert sent.get_predefined_options() is profile
    values = tuning(sent)  # what the database is opened with
    assert (values.block_cache_bytes, values.write_buffer_manager_bytes) == (
        after[0] << 20,
        after[1] << 20,
    )


# -- TypeSerializer and the window serializers (bytes recorded from PyFlink 2.3) -------------

WINDOW_BYTES = [
    (TimeWindowSerializer(), TimeWindow(1, 5), "00000000000000010000000000000005"),
    (TimeWindowSerializer(), TimeWindow(-3, 1700000000000), "fffffffffffffffd0000018bcfe56800"),
    (CountWindowSerializer(), CountWindow(7), "0000000000000007"),
    (GlobalWindowSerializer(), GlobalWindow.get(), "00"),
]


@pytest.mark.parametrize(("serializer", "window", "hex_bytes"), WINDOW_BYTES)
def test_a_window_serializer_writes_pyflinks_bytes_and_reads_them_back(
    serializer, window, hex_bytes
):
    stream = BytesIO()
    serializer.serialize(window, stream)
    assert stream.getvalue().hex() == hex_bytes
    after = BytesIO(bytes.fromhex(hex_bytes) + b"next")
    assert serializer.deserialize(after) == window
    assert after.read() == b"next"  # it read its own bytes only
    assert isinstance(serializer, TypeSerializer) and serializer == type(serializer)()


def test_a_short_stream_is_one_line_and_a_user_serializer_subclasses_the_interface():
    with pytest.raises(ConfigurationError, match="a TimeWindow needs 16 bytes"):
        TimeWindowSerializer().deserialize(BytesIO(b"\x00" * 8))

    class Text(TypeSerializer[str]):
        def serialize(self, element: str, stream: BytesIO) -> None:
            stream.write(element.encode() + b"\n")

        def deserialize(self, stream: BytesIO) -> str:
            return stream.readline().decode().rstrip("\n")

    stream = BytesIO()
    Text().serialize("a", stream)
    assert Text().deserialize(BytesIO(stream.getvalue())) == "a"
    with pytest.raises(TypeError):
        TypeSerializer()  # type: ignore[abstract]


# -- values: JobID, CompletableFuture, RestartStrategyConfiguration, ... ---------------------


def test_a_job_id_is_the_hex_text_barrierflow_reports():
    job_id = JobID.generate()
    assert len(job_id) == 32 and JobID(job_id.upper()) == job_id
    assert str(JobID("5a4f3e2d1c0b5a4f3e2d1c0b5a4f3e2d")) == "5a4f3e2d1c0b5a4f3e2d1c0b5a4f3e2d"
    with pytest.raises(ConfigurationError, match="32 hexadecimal digits"):
        JobID("job-1")


def test_completable_future_is_the_future_barrierflow_returns():
    future: Future[int] = Future()
    assert isinstance(future, CompletableFuture)
    assert (future.done(), future.cancelled()) == (False, False)
    future.set_result(3)
    assert (future.done(), future.result(), future.exception()) == (True, 3, None)


def test_restart_strategies_are_restart_strategy_configurations():
    for strategy in (
        RestartStrategies.no_restart(),
        RestartStrategies.fixed_delay_restart(3, 1000),
    ):
        assert isinstance(strategy, RestartStrategyConfiguration)


def test_plain_values_keep_pyflinks_members():
    assert [m.name for m in InputDependencyConstraint] == ["ANY", "ALL"]
    assert [m.name for m in Semantic] == [m.name for m in DeliveryGuarantee]
    ordered = AsyncFunctionDescriptor.OutputMode.ORDERED
    descriptor = AsyncFunctionDescriptor("f", 1000, 10, None, ordered)
    assert (descriptor.async_function, descriptor.timeout, descriptor.capacity) == ("f", 1000, 10)
    assert [m.name for m in AsyncFunctionDescriptor.OutputMode] == ["ORDERED", "UNORDERED"]


# -- the file connector's accepted-and-ignored providers and refused compaction settings ------


def test_file_source_providers_are_accepted_and_change_nothing(tmp_path):
    (tmp_path / "a.txt").write_text("x\ny\n")
    plain = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path))
    provided = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path))
        .set_file_enumerator(FileEnumeratorProvider.default_splittable_file_enumerator())
        .set_split_assigner(FileSplitAssignerProvider.locality_aware_split_assigner())
    )
    splits = [s.split_id for s in plain.build().create_splits()]
    assert [s.split_id for s in provided.build().create_splits()] == splits
    assert len(splits) == 1


def test_compaction_settings_are_checked_before_enable_compact_refuses_them():
    strategy = FileCompactStrategy.builder().enable_compaction_on_checkpoint(3).build()
    assert (strategy.checkpoints, strategy.size_threshold, strategy.threads) == (3, -1, 1)
    assert FileCompactor.concat_file_compactor(b"\n").file_delimiter == b"\n"
    with pytest.raises(ConfigurationError, match="compact threads must be an integer >= 1"):
        FileCompactStrategy.builder().set_num_compact_threads(0)
