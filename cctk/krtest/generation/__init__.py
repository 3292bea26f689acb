"""KR-Test items made: the seeded fictional set (``generate``), a user's corpora (``corpora``), a teacher
LLM behind an OpenAI-compatible endpoint or a local model (``teacher``), the checks an item must pass
(``validate``), the journal that makes a generation resumable (``journal``), items from the user's
corpus (``from_corpus``), the paper's oracle (``oracle``) and that oracle as generation's second gate
(``gate``). The endpoint's client (openai) is imported here only."""
