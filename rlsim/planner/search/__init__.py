"""``rlsim plan``: search the placements of a cluster and describe the chosen one.

``grid``: the placements to try, checked against the cluster, then ranked; ``plan``: the whole flow
without the command line (check every input, evaluate, search, choose); ``report``: the ranked table,
the JSON document and the plots.
"""
