"""A third manual, written as a newcomer would write one, to prove the base class whole (#45 item 4): its own facts
(``facts``: the last digit and the tens digit of every sum), two arms, one table and one figure (``manual``), and
nothing of cctk changed to run it. A test registers it with one line, the one a manual inside cctk adds to
``cctk.manuals.registry.HOMES``: ``"toy": "toy_manual.manual:TOY"``."""
