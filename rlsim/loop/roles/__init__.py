"""The loop's roles, each built inside its actor: scoring, the policy update, the reference and the critic.

``reward_stage`` (rollouts in, rewards out), ``trainer`` (the policy update), ``reference`` (log-probs for the
KL), ``critic`` (PPO's value model), ``packing`` (rollouts as padded tensors, shared by the three torch roles),
``build`` (picklable factories that build each role from the config in its actor process).
"""
