"""Users' own training logs read as found: verl and OpenRLHF, console, JSONL and TensorBoard.

``records`` (one ``(line, {key: value})`` per logged step, from each format), ``tensorboard`` (event files read
without TensorBoard), ``frameworks`` (which framework and release wrote the keys; a checked, typed record per
step), ``logged_step`` (a step as the planner's phases), ``replay`` (how well a profile predicts the steps:
per step, the whole run, and held out). The fit itself is ``profile.fitting.logs``.
"""
