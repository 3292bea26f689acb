"""What touches a language model: the roster and loading (``models``), the device and its memory
(``device``, ``memory``), FLOPs and GEMM peaks (``compute``), the one scoring kernel (``scoring``),
training rows (``corpus``), fine-tuning (``finetune``) and the record of a fine-tuning run (``record``)."""
