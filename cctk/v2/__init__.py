"""What is manual 2.0.0's own and sits below ``cctk.protocols``: its figure catalog (``catalog``)."""
