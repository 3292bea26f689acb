"""KR-Test measured: question files (``items``), passages and locations (``passages``), the likelihood
rule (``scoring``), LoRA at a parameter budget (``lora``), fine-tuning with periodic evaluations
(``train``), ``KRTestCallback`` for a Hugging Face Trainer (``callback``) and the files, figure and
table (``report``)."""
