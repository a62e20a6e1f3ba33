"""One module per Task state, named like its function: the logic of ``functions/<verb_noun>/app.py``
(state "Verb Noun") is ``steps/<verb_noun>.py``. Record Job Outcome shares Record Outcome's module
(one Record step for both workflows). What several steps share has a name of its own:
``commands.py`` (dispatch a command to the orchestrator, or answer its task here), ``admission.py``
(both Validate steps: parse any start input, then admit it or not), ``settle.py`` (every end
settles what the incident holds). tests/contract/test_step_modules.py keeps to this.
"""
