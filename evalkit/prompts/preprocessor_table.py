"""The built-in preprocessors: name, aliases and where each class lives, so a lookup imports one module.

A run names one or two preprocessors; importing every family (AU-Harness's, KARMA's, ChEF's) to find them
cost its start-up a dozen modules. The classes still carry their ``@PREPROCESSORS.register`` decorators;
the registry accepts a decorator that registers what this table says, and ``tests/test_preprocessor_table.py``
fails when a class is registered that the table does not name, or the table names one that is not there.
"""

from __future__ import annotations

#: (name, aliases, "module:class"), in the order the modules register them
BUILTIN_PREPROCESSORS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("GeneralPreprocessor", ("general",), "evalkit.prompts.preprocessors:GeneralPreprocessor"),
    ("MultiturnPreprocessor", ("multiturn",), "evalkit.prompts.preprocessors:MultiturnPreprocessor"),
    ("MultipleChoicePreprocessor", ("mcq",), "evalkit.prompts.preprocessors:MultipleChoicePreprocessor"),
    (
        "CircularMultipleChoicePreprocessor",
        ("mcq_circular",),
        "evalkit.prompts.preprocessors:CircularMultipleChoicePreprocessor",
    ),
    (
        "InstructionAsSystemPreprocessor",
        ("instruction_as_system",),
        "evalkit.prompts.preprocessors:InstructionAsSystemPreprocessor",
    ),
    ("AuHarnessPreprocessor", ("auharness",), "evalkit.prompts.auharness.general:AuHarnessPreprocessor"),
    ("KarmaCaresPreprocessor", ("karma_cares",), "evalkit.prompts.karma.sets:KarmaCaresPreprocessor"),
    (
        "KarmaPatientSafetyPreprocessor",
        ("karma_patient_safety",),
        "evalkit.prompts.karma.sets:KarmaPatientSafetyPreprocessor",
    ),
    (
        "KarmaAfrimedqaOpenPreprocessor",
        ("karma_afrimedqa_open",),
        "evalkit.prompts.karma.sets:KarmaAfrimedqaOpenPreprocessor",
    ),
    (
        "KarmaAfrimedqaMcqPreprocessor",
        ("karma_afrimedqa_mcq",),
        "evalkit.prompts.karma.sets:KarmaAfrimedqaMcqPreprocessor",
    ),
    (
        "KarmaAfrimedqaHarmPreprocessor",
        ("karma_afrimedqa_harm",),
        "evalkit.prompts.karma.sets:KarmaAfrimedqaHarmPreprocessor",
    ),
    ("KarmaCalculatorPreprocessor", ("karma_calculator",), "evalkit.prompts.karma.sets:KarmaCalculatorPreprocessor"),
    ("KarmaPubmedqaPreprocessor", ("karma_pubmedqa",), "evalkit.prompts.karma.sets:KarmaPubmedqaPreprocessor"),
    ("ChefSeedBenchPreprocessor", ("chef_seedbench",), "evalkit.prompts.chef.sets:ChefSeedBenchPreprocessor"),
    ("ChefSeedBench2Preprocessor", ("chef_seedbench2",), "evalkit.prompts.chef.sets:ChefSeedBench2Preprocessor"),
    (
        "ChefWinogroundCapPreprocessor",
        ("chef_winoground_cap",),
        "evalkit.prompts.chef.sets:ChefWinogroundCapPreprocessor",
    ),
    ("ChefWinogroundPreprocessor", ("chef_winoground",), "evalkit.prompts.chef.sets:ChefWinogroundPreprocessor"),
    ("BfclPreprocessor", ("bfcl",), "evalkit.prompts.auharness.bfcl:BfclPreprocessor"),
    ("SpiderPreprocessor", ("spider",), "evalkit.prompts.auharness.spider:SpiderPreprocessor"),
    ("SpokenWozPreprocessor", ("spokenwoz",), "evalkit.prompts.auharness.spokenwoz:SpokenWozPreprocessor"),
    (
        "AuHarnessVoiceBenchPreprocessor",
        ("auharness_voicebench",),
        "evalkit.prompts.auharness.spoken_question:AuHarnessVoiceBenchPreprocessor",
    ),
    (
        "AuHarnessBigBenchAudioPreprocessor",
        ("auharness_big_bench_audio",),
        "evalkit.prompts.auharness.spoken_question:AuHarnessBigBenchAudioPreprocessor",
    ),
    (
        "AuHarnessMultiturnPreprocessor",
        ("auharness_multiturn",),
        "evalkit.prompts.auharness.multiturn:AuHarnessMultiturnPreprocessor",
    ),
    ("ChefMultiturnPreprocessor", ("chef_multiturn",), "evalkit.prompts.chef.multiturn:ChefMultiturnPreprocessor"),
    (
        "ChefMultiturnPplPreprocessor",
        ("chef_multiturn_ppl",),
        "evalkit.prompts.chef.multiturn:ChefMultiturnPplPreprocessor",
    ),
    ("ChefScienceQAPreprocessor", ("chef_scienceqa",), "evalkit.prompts.chef.questions:ChefScienceQAPreprocessor"),
    ("ChefQuestionPreprocessor", ("chef_question",), "evalkit.prompts.chef.questions:ChefQuestionPreprocessor"),
    ("ChefMMBenchPreprocessor", ("chef_mmbench",), "evalkit.prompts.chef.questions:ChefMMBenchPreprocessor"),
    ("ChefMMMUPreprocessor", ("chef_mmmu",), "evalkit.prompts.chef.questions:ChefMMMUPreprocessor"),
    (
        "KarmaMedicalHistoryPreprocessor",
        ("karma_medical_history",),
        "evalkit.prompts.karma.preprocessors:KarmaMedicalHistoryPreprocessor",
    ),
    ("KarmaTemplatePreprocessor", ("karma_template",), "evalkit.prompts.karma.preprocessors:KarmaTemplatePreprocessor"),
    (
        "KarmaMedCaseReasoningPreprocessor",
        ("karma_medcasereasoning",),
        "evalkit.prompts.karma.preprocessors:KarmaMedCaseReasoningPreprocessor",
    ),
    ("KarmaAmqaPreprocessor", ("karma_amqa",), "evalkit.prompts.karma.preprocessors:KarmaAmqaPreprocessor"),
    (
        "KarmaAmqaRacePreprocessor",
        ("karma_amqa_race",),
        "evalkit.prompts.karma.preprocessors:KarmaAmqaRacePreprocessor",
    ),
    (
        "KarmaAmqaGenderPreprocessor",
        ("karma_amqa_gender",),
        "evalkit.prompts.karma.preprocessors:KarmaAmqaGenderPreprocessor",
    ),
    ("KarmaAmqaSesPreprocessor", ("karma_amqa_ses",), "evalkit.prompts.karma.preprocessors:KarmaAmqaSesPreprocessor"),
    ("KarmaNfiPreprocessor", ("karma_nfi",), "evalkit.prompts.karma.preprocessors:KarmaNfiPreprocessor"),
)

#: every module holding built-in preprocessors (the table's modules, for the test and the listings)
PREPROCESSOR_MODULES: tuple[str, ...] = tuple(
    dict.fromkeys(target.partition(":")[0] for _, _, target in BUILTIN_PREPROCESSORS)
)
