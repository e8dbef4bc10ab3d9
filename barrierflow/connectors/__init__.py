"""Connectors: `barrierflow.connectors.files` (FileSource, FileSink),
`barrierflow.connectors.datagen` (DataGeneratorSource, NumberSequenceSource)."""
