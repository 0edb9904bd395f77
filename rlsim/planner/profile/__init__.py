"""What the simulation knows about one kind of hardware: the versioned JSON profile.

``schema``: the profile's models, ``load_profile`` / ``save_profile`` and the schema-version check;
``fitting``: least-squares fits of those models from measurements; ``examples``: the illustrative
(not measured) profiles shipped in ``configs/profiles/``.
"""
