"""The kernels (the bottom floor): configuration, errors, the facts of the 81 additions, labels,
readings, statistics, typed records, provenance and progress; ``lm/`` holds what touches a language
model (loading, devices, memory, compute, scoring, corpora, fine-tuning). They know nothing of MLflow,
the manuals' designs or the command line."""
