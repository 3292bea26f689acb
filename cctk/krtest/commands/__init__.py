"""KR-Test's commands as functions, tracked in MLflow: eval and train (``jobs``), the study
(``study``), a study over seeds (``seeds``) and KR-Test runs compared (``compare``). Their command
line is ``cctk.cli.krtest``."""
