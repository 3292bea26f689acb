from dataclasses import asdict

import pytest

from cctk.core.config import Recipe, draw_seeds, parse_seeds, seeds_or_count
from cctk.core.errors import CctkError
from cctk.manuals import configure
from cctk.manuals.configure import make_config
from cctk.manuals.v1.manual import V1
from cctk.manuals.v2.config import PROFILES
from cctk.manuals.v2.manual import V2


def test_paper_profile_is_the_manuals_recipe():
    assert asdict(PROFILES["paper"]) == {
        "repeats": 20,
        "epochs": 10,
        "learning_rate": 5e-5,
        "batch_size": 8,
        "grad_clip": 1.0,
        "weight_decay": 0.01,
        "schedule": "constant",
        "warmup": 0.0,
        "precision": "float32",
        "optimizer": "adamw",
    }


def test_steps_count_the_last_partial_batch_of_every_epoch():
    assert Recipe(epochs=3, batch_size=8).steps(81) == 33 and Recipe(epochs=4, batch_size=8).steps(80) == 40


def test_learning_rate_schedules():
    total = 10
    assert [Recipe().lr_factor(s, total) for s in range(total)] == [1.0] * total  # the manual's listing
    linear = Recipe(schedule="linear", warmup=0.2)  # 2 warm-up steps, then 8 decaying steps
    assert [linear.lr_factor(s, total) for s in range(total)] == [
        0.5,
        1.0,
        1.0,
        0.875,
        0.75,
        0.625,
        0.5,
        0.375,
        0.25,
        0.125,
    ]
    assert [Recipe(schedule="linear").lr_factor(s, 4) for s in range(4)] == [1.0, 0.75, 0.5, 0.25]
    assert [Recipe(warmup=0.5).lr_factor(s, 4) for s in range(4)] == [0.5, 1.0, 1.0, 1.0]


def test_overrides_replace_one_value_each():
    config = make_config("smollm2-135m-bundled", "quick", (7,), epochs=9, learning_rate=None)
    assert config.recipe.epochs == 9
    assert config.recipe.learning_rate == PROFILES["quick"].learning_rate
    assert config.seed == 7


@pytest.mark.parametrize(
    ("override", "word"),
    [
        ({"epochs": 0}, "epochs=0"),
        ({"repeats": -1}, "repeats=-1"),
        ({"batch_size": 0}, "batch_size=0"),
        ({"learning_rate": 0.0}, "learning_rate=0.0"),
        ({"learning_rate": float("nan")}, "learning_rate=nan"),
        ({"grad_clip": -0.5}, "grad_clip=-0.5"),
        ({"weight_decay": 2.0}, "weight_decay=2.0"),
        ({"schedule": "cosine"}, "schedule='cosine'"),
        ({"warmup": 1.0}, "warmup=1.0"),
        ({"epochs": 100000000}, "epochs=100000000 is out of range: at most 10,000"),  # it started the run
        ({"repeats": 10001}, "repeats=10001 is out of range: at most 10,000"),
    ],
)
def test_recipe_values_out_of_range_fail_in_one_line(override, word):
    with pytest.raises(CctkError) as caught:
        make_config("m", "smoke", (1,), **override)
    assert word in str(caught.value) and "\n" not in str(caught.value)


def test_unknown_profile_and_bad_holdout():
    with pytest.raises(CctkError, match="unknown profile 'fast'"):
        make_config("m", "fast", (1,))
    with pytest.raises(CctkError, match=r"holdout=1.2"):
        make_config("m", "smoke", (1,), holdout=1.2)


def test_no_seed_draws_fresh_distinct_seeds_and_says_so():
    config = make_config("m", "smoke")
    assert config.seeds_drawn and len(set(config.seeds)) == len(config.seeds) == 5
    assert draw_seeds() != draw_seeds()


def test_parse_seeds():
    assert parse_seeds("7") == (7, 8, 9, 10, 11)
    assert parse_seeds("3,1,4") == (3, 1, 4)
    assert parse_seeds(None) is None and parse_seeds("") is None
    with pytest.raises(CctkError, match="integers"):
        parse_seeds("seven")


def test_seeds_or_count_takes_a_count_a_list_or_one_seed_with_its_comma():
    assert len(set(seeds_or_count("3"))) == 3
    assert seeds_or_count("5,9") == (5, 9) and seeds_or_count("1959666577,") == (1959666577,)
    with pytest.raises(CctkError) as error:  # a seed without its comma would draw 2e9 seeds (it hung)
        seeds_or_count("1959666577")
    assert str(error.value) == (
        "--seeds 1959666577 would draw 1959666577 fresh seeds (at most 1000); "
        "for the one seed 1959666577 write --seeds 1959666577,"
    )
    assert seeds_or_count("5,9,") == (5, 9)
    for bad in ("0", ",", "5,5", "x", "1,,2", ",1", "-1,2", ""):  # an empty part is no seed (1,,2 ran 1 and 2)
        with pytest.raises(CctkError):
            seeds_or_count(bad)


def test_params_carry_every_recipe_value():
    config = make_config("m", "paper", (1, 2))
    params = config.as_params()
    assert {f"recipe.{k}" for k in asdict(Recipe())} <= set(params)
    assert params["seeds"] == "1,2" and "holdout_share" not in params  # the manual's, not the core's
    assert params["recipe.repeats"] == 20
    assert (
        configure.params(V2, config)["holdout_share"] == 0.3 and configure.params(V2, config).items() >= params.items()
    )


def test_the_largest_seed_is_valid_and_its_reserved_seeds_wrap():
    assert parse_seeds("4294967295") == (4294967295, 0, 1, 2, 3)
    assert make_config("m", "smoke", parse_seeds("4294967295")).seed == 4294967295
    with pytest.raises(CctkError, match=r"seeds must be in 0..2\*\*32-1 \(4294967295\), got 4294967296$"):
        parse_seeds("4294967296")  # the value typed, not the ones derived from it


def test_a_recipe_field_has_one_python_type_read_from_its_annotation():
    from dataclasses import asdict, fields

    from cctk.core.config import Recipe, field_type, parse_set

    assert {f.name: field_type(f.name) for f in fields(Recipe)} == {n: type(v) for n, v in asdict(Recipe()).items()}
    assert field_type("epochs") is int and field_type("learning_rate") is float and field_type("schedule") is str
    assert parse_set("epochs=2,3") == ("epochs", (2, 3)) and parse_set("warmup=0,0.1") == ("warmup", (0.0, 0.1))
    params = {
        "model": "smollm2-135m-bundled",
        "profile": "smoke",
        "seeds": "5",
        "holdout_share": "0.3",
        "recipe.epochs": "4",
        "recipe.learning_rate": "0.001",
        "recipe.schedule": "linear",
    }
    recipe = configure.config_from_params(V2, params).recipe
    assert (recipe.epochs, recipe.learning_rate, recipe.schedule) == (4, 0.001, "linear")
    assert type(recipe.epochs) is int


def test_a_configuration_read_back_from_its_parameters_keeps_its_manual():
    """A resume reads the configuration of its run's manual: a v1 run's stays v1's (one seed, its recipes),
    a v2 run's keeps its options."""
    v1 = make_config("m", "smoke", (7,), protocol="v1", epochs=3)
    back = configure.config_from_params(V1, {k: str(v) for k, v in configure.params(V1, v1).items()})
    assert back == v1 and back.protocol == "v1" and back.seeds == (7,)
    v2 = make_config("m", "smoke", parse_seeds("7"), holdout=0.2, parts="A,C", curves=True)
    assert configure.config_from_params(V2, {k: str(v) for k, v in configure.params(V2, v2).items()}) == v2
