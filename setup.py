"""The one thing pyproject.toml cannot say: the checkout's top-level `alembic/` folder
(where migrations are written) ships inside the wheel as the package
`memwell.migrations`, so an installed Memwell migrates from any directory. A
top-level `alembic` package would shadow the Alembic library, so it is never shipped.
Everything else about the build is in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(include=["memwell", "memwell.*", "api", "api.*", "worker", "worker.*"]),
        "memwell.migrations",
        "memwell.migrations.versions",
    ],
    package_dir={"memwell.migrations": "alembic"},
)
