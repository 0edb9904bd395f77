"""What the simulation knows about one kind of hardware: the versioned JSON profile.

``schema``: the profile's models, ``load_profile`` / ``save_profile`` and the schema-version check;
``fitting``: every least-squares fit of those models (to measurements; ``loops``: to real loop runs;
``logs``: to a framework's log; ``gpu``, ``gpu_logs``: the GPU model's factors); ``logs``: users' training
logs read as found; ``examples``: the illustrative
(not measured) profiles shipped in ``configs/profiles/``.
"""
