"""Where runs are kept: the session folder and its files (``session``), MLflow behind one module
(``tracking``, the only one that imports mlflow) with the shipped tracking configurations
(``mlruns_config/``), and citing a run (``citation``). ``cctk.results`` reads a run back for papers."""
