"""The report's sections, one module each defining ``SECTION`` (tasks/report/section.py); their
`order` places them: 100s the ranking of frameworks, 400s the modalities, 500s-700s the post-job
evaluations and costs, 900s the notes and explanations."""
