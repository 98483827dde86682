from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KML = ROOT.parent / "shared" / "reference" / "kml" / "readahead"


@pytest.fixture(scope="session")
def kml_dir() -> Path:
    if not KML.is_dir():
        pytest.skip(f"reference data not found at {KML}")
    return KML
