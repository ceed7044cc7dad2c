"""The derived resources' storage: their records, inputs and run queue (`records`), a
run's plan and the output built from it (`plans`), and the staged output swapped in for
the published one (`outputs`), and the history of finished runs (`runs`).
"""
