"""Corpora as users have them: a file, a folder of .txt/.md, a .jsonl; passages shaped by token bounds."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fault_server import FaultServer

from cctk.cli.main import cli
from cctk.core.errors import CctkError
from cctk.krtest.generation.corpora import Document, cut, read_documents

CORPUS = Path(__file__).parents[2] / "data" / "kr_recorded_corpus.txt"
WIKITEXT = (
    " = Harlow = \n \n The lamp is white . It was lit in 1864 . \n \n = = History = = \n \n"
    " The keeper lived on the island . He rowed ashore each week . His son kept the lamp after 1901 . \n"
)


def shapes(documents, tokenizer, **bounds):
    return [
        (d, p.text, p.start)
        for d, p in ((f.document, f.passage) for f in cut(documents, "blank-lines", tokenizer, **bounds))
    ]


def test_headings_merge_into_the_next_passage_and_long_ones_split_at_sentence_ends(tokenizer):
    doc = [Document("w", WIKITEXT)]
    assert len(shapes(doc, tokenizer)) == 4  # every heading its own passage (and request)
    merged = shapes(doc, tokenizer, min_tokens=8)
    assert [t.split("\n")[0].strip() for _, t, _ in merged] == ["= Harlow =", "= = History = ="]
    assert merged[1][1].endswith("after 1901 .") and merged[1][2] == WIKITEXT.index("= = History")
    assert all(WIKITEXT[start:].startswith(text) for _, text, start in merged)  # a location points at its text
    split = shapes(doc, tokenizer, min_tokens=8, max_tokens=16)
    texts = [t for _, t, _ in split]
    assert texts[-2:] == ["He rowed ashore each week .", "His son kept the lamp after 1901 ."]
    assert all(t.rstrip().endswith(".") for t in texts)  # cut at sentence ends only
    assert all(WIKITEXT[start:].startswith(text) for _, text, start in split)
    for _, text, _ in split[-2:]:
        assert len(tokenizer(text, add_special_tokens=False)["input_ids"]) <= 16


def test_a_passage_never_joins_two_documents(tokenizer):
    docs = [Document("a", "Short.\n"), Document("b", "Also short.\n\nA longer passage about the lamp of Harlow.\n")]
    assert shapes(docs, tokenizer, min_tokens=6) == [
        (0, "Short.", 0),
        (1, "Also short.\n\nA longer passage about the lamp of Harlow.", 0),
    ]


def test_folder_and_jsonl_give_the_same_items_as_one_file(tiny_dir, tmp_path, tracking_uri):
    paragraphs = [p.strip() for p in CORPUS.read_text().split("\n\n")]
    folder = tmp_path / "folder"
    folder.mkdir()
    for k, text in enumerate(paragraphs):
        (folder / f"{k:02d}.{'md' if k % 2 else 'txt'}").write_text(text + "\n")
    (folder / "notes.csv").write_text("not a document\n")
    jsonl = tmp_path / "corpus.jsonl"
    jsonl.write_text("".join(json.dumps({"body": t, "id": k}) + "\n" for k, t in enumerate(paragraphs)))
    found = {}
    with FaultServer(CORPUS.read_text()) as server:
        for name, corpus, extra in (
            ("file", CORPUS, []),
            ("folder", folder, []),
            ("jsonl", jsonl, ["--text-field", "body"]),
        ):
            result = CliRunner().invoke(
                cli,
                [
                    "krtest",
                    "generate",
                    "--corpus",
                    str(corpus),
                    "--teacher",
                    server.url,
                    "--tokenizer",
                    str(tiny_dir),
                    "--per-passage",
                    "1",
                    "--out",
                    str(tmp_path / name),
                    *extra,
                ],
            )
            assert result.exit_code == 0, result.output
            found[name] = [json.loads(line) for line in (tmp_path / name / "questions.jsonl").read_text().splitlines()]
    texts = {
        name: [(q["context"], q["sentence_true"], q["sentence_false"]) for q in items] for name, items in found.items()
    }
    assert texts["file"] == texts["folder"] == texts["jsonl"] and len(texts["file"]) == 8
    assert [q["document"] for q in found["folder"]] == sorted(p.name for p in folder.glob("0*"))
    assert [q["document"] for q in found["jsonl"]] == [f"corpus.jsonl:{k}" for k in range(1, 9)]
    for q in found["folder"]:  # each location points into its own document
        assert (folder / q["document"]).read_text()[q["location"] :].startswith(q["context"])
    assert "document" not in found["file"][0]
    record = json.loads((tmp_path / "folder" / "generation.json").read_text())
    assert [d["name"] for d in record["documents"]][:2] == ["00.txt", "01.md"] and len(record["documents"]) == 8


def test_dry_run_sends_nothing_and_writes_nothing(tiny_dir, tmp_path, tracking_uri):
    with FaultServer(CORPUS.read_text()) as server:
        result = CliRunner().invoke(
            cli,
            [
                "krtest",
                "generate",
                "--corpus",
                str(CORPUS),
                "--teacher",
                server.url,
                "--tokenizer",
                str(tiny_dir),
                "--dry-run",
                "--out",
                str(tmp_path / "o"),
            ],
        )
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 9 and lines[0].startswith("passage 1: kr_recorded_corpus.txt location 0, ~")
    assert lines[-1].startswith("dry run: 8 passages in 1 document, 8 requests, 24 items asked, about ")
    assert server.asked == [] and server.models_asked == 0 and not (tmp_path / "o").exists()


def test_bad_corpora_fail_in_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CctkError, match=r"holds no .txt or .md file"):
        read_documents(tmp_path / "empty")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"body": "no text field"}\n')
    with pytest.raises(CctkError, match=r"bad.jsonl line 2: no string field 'text' \(choose it with --text-field\)"):
        read_documents(bad)
    with pytest.raises(CctkError, match="does not exist"):
        read_documents(tmp_path / "nothing.txt")
