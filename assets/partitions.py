import dagster as dg

# One partition per archive file; keys come from pipeline.store.partition_key.
archives_partitions = dg.DynamicPartitionsDefinition(name="archives")
