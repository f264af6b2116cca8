"""tessera reads OME-NGFF metadata the way the official test suites say.

Each case of ngff-spec's {0.4,0.5}/tests/{plate,well,image}_suite.json is
written as a store (0.4: .zgroup + .zattrs, 0.5: zarr.json) and given to
`tessera info`. Valid cases must be accepted (except images with axes other
than t/c/z/y/x, which tessera refuses by design, with a message saying so);
invalid cases must be refused with one line naming the store's metadata
file, except the flaws tessera does not read (acquisition details, omero
rendering hints, optional indices), which are listed below.

0.4 plate cases carry no "version"; tessera requires one (a v2 store
without it could be 0.1-0.3), so "0.4" is added to each plate case except
the one about the version itself.

The suites are metadata only: their images have no arrays, their wells no
image groups. `tessera info` describes such a store and lists what is
absent in "errors" with exit 1; a valid case is accepted when that is all
it reports (metadata_only_ok), an invalid one must be refused at its
metadata (nothing described).
"""
import copy
import json
import os
import shutil
import subprocess
from interop_checks import check, finish

BIN = os.environ["TESSERA_BIN"]
DATA = os.environ["TESSERA_TESTDATA"]
TMP = os.path.join(os.environ["TESSERA_TEST_TMP"], "ngff_suites")
SPEC = os.path.join(DATA, "ngff-spec")

NOT_READ = {
    "plate": ("acquisition", "missing_well_rowIndex", "missing_well_columnIndex", "zero_field_count",
              "negative_endtime"),
    "well": ("non_integer_acquisition_id",),
    "image": ("invalid_channels_color", "invalid_channels_window"),
}
CUSTOM_AXES = ("untyped_axes", "custom_type_axes")
# Valid for the schema, which does not compare lengths, but the spec text
# wants one scale per axis (this one has 2 for 3 axes): refused.
SCALE_LENGTH = ("0.4", "image", "valid/mismatch_axes_units.json")



ABSENT = ("no zarr array", "not a zarr group", "its group has no metadata on disk")


def metadata_only_ok(p):
    """info read the metadata and reported only the absent arrays / groups."""
    if p.returncode == 0:
        return True
    try:
        errors = json.loads(p.stdout)["errors"]
    except (ValueError, KeyError):
        return False
    return p.returncode == 1 and errors and all(any(a in e for a in ABSENT) for e in errors)


def write_group(path, version, attrs):
    os.makedirs(path, exist_ok=True)
    if version == "0.4":
        with open(os.path.join(path, ".zgroup"), "w") as f:
            json.dump({"zarr_format": 2}, f)
        with open(os.path.join(path, ".zattrs"), "w") as f:
            json.dump(attrs, f)
    else:
        with open(os.path.join(path, "zarr.json"), "w") as f:
            json.dump({"zarr_format": 3, "node_type": "group", "attributes": attrs}, f)


def plate_attrs(version):
    p = {"columns": [{"name": "1"}], "rows": [{"name": "A"}],
         "wells": [{"path": "A/1", "rowIndex": 0, "columnIndex": 0}]}
    return {"plate": dict(p, version="0.4")} if version == "0.4" else {"ome": {"version": "0.5", "plate": p}}


def build(kind, version, name, data, root):
    if os.path.exists(root):
        shutil.rmtree(root)
    data = copy.deepcopy(data)
    if kind == "plate":
        if version == "0.4" and "invalid_version" not in name and isinstance(data.get("plate"), dict):
            data["plate"].setdefault("version", "0.4")
        write_group(root, version, data)
    elif kind == "well":
        write_group(root, version, plate_attrs(version))
        write_group(os.path.join(root, "A"), version, {})
        write_group(os.path.join(root, "A", "1"), version, data)
    else:
        write_group(root, version, data)


def main():
    counts = {}
    for version in ("0.4", "0.5"):
        for kind in ("plate", "well", "image"):
            with open(os.path.join(SPEC, version, "tests", f"{kind}_suite.json")) as f:
                suite = json.load(f)
            for i, case in enumerate(suite["tests"]):
                name = case.get("formerly", str(i))
                root = os.path.join(TMP, f"{version}_{kind}_{i}.zarr")
                build(kind, version, name, case["data"], root)
                p = subprocess.run([BIN, "info", root, "--json"], capture_output=True, text=True)
                label = f"{version} {kind} '{name}' (valid={case['valid']})"
                lines = p.stderr.strip().splitlines()
                if case["valid"] and kind == "image" and any(c in name for c in CUSTOM_AXES):
                    check(p.returncode == 1 and "t, c, z, y, x" in p.stderr, f"{label}: custom axes: {p.stderr.strip()}")
                    counts["custom axes refused"] = counts.get("custom axes refused", 0) + 1
                elif (version, kind, name) == SCALE_LENGTH:
                    check(p.returncode == 1 and "one per axis" in p.stderr, f"{label}: {p.stderr.strip()}")
                elif case["valid"]:
                    check(metadata_only_ok(p), f"{label}: refused: {p.stderr.strip()}")
                    if metadata_only_ok(p):
                        info = json.loads(p.stdout)
                        if kind != "image":
                            check(info["kind"] == "plate" and info["nwells"] == 1, f"{label}: info {info}")
                    counts["valid accepted"] = counts.get("valid accepted", 0) + 1
                elif any(n in name for n in NOT_READ[kind]):
                    counts["invalid, not read by tessera"] = counts.get("invalid, not read by tessera", 0) + 1
                else:
                    check(p.returncode == 1 and not p.stdout, f"{label}: accepted (rc {p.returncode})")
                    check(len(lines) == 1 and os.path.basename(root) in p.stderr,
                          f"{label}: message does not name the store: {p.stderr.strip()}")
                    counts["invalid refused"] = counts.get("invalid refused", 0) + 1
                    print(f"  {label}: {lines[-1] if lines else ''}")
    print(counts)
    check(counts.get("invalid refused", 0) >= 60, f"only {counts.get('invalid refused', 0)} invalid cases refused")

    # the strict examples of the spec read as plates and wells too
    for version in ("0.4", "0.5"):
        for ex in sorted(os.listdir(os.path.join(SPEC, version, "examples", "plate_strict"))):
            if not ex.endswith(".json") or ex.startswith("."):
                continue
            with open(os.path.join(SPEC, version, "examples", "plate_strict", ex)) as f:
                text = "\n".join(l for l in f.read().splitlines() if not l.lstrip().startswith("//"))
            doc = json.loads(text)
            attrs = doc["attributes"] if version == "0.5" else doc
            root = os.path.join(TMP, f"example_{version}_{ex}.zarr")
            build("plate", version, ex, attrs, root)
            p = subprocess.run([BIN, "info", root, "--json"], capture_output=True, text=True)
            check(metadata_only_ok(p), f"{version} example {ex}: {p.stderr.strip()}")
            if metadata_only_ok(p):
                wells = attrs["plate"]["wells"] if version == "0.4" else attrs["ome"]["plate"]["wells"]
                check(json.loads(p.stdout)["nwells"] == len(wells), f"{version} example {ex}: well count")

    # ome-zarr-models-py examples: plate and well metadata, and its 0.4 HCS store
    ozm = os.path.join(DATA, "ome-zarr-models-py", "tests", "data", "examples")
    for version, sub in (("0.4", "v04"), ("0.5", "v05")):
        for ex in sorted(os.listdir(os.path.join(ozm, sub))):
            if not ex.endswith(".json") or not (ex.startswith("plate") or ex.startswith("well") or ex.startswith("hcs")):
                continue
            with open(os.path.join(ozm, sub, ex)) as f:
                doc = json.load(f)
            if version == "0.4" and ex.startswith("plate"):
                doc = {"plate": dict(doc, version="0.4")}
            kind = "well" if ex.startswith("well") else "plate"
            root = os.path.join(TMP, f"ozm_{sub}_{ex}.zarr")
            build(kind, version, ex, doc, root)
            p = subprocess.run([BIN, "info", root, "--json"], capture_output=True, text=True)
            check(metadata_only_ok(p), f"ome-zarr-models {sub}/{ex}: {p.stderr.strip()}")
            if metadata_only_ok(p) and kind == "well":
                info = json.loads(p.stdout)
                images = (doc if version == "0.4" else doc["ome"])["well"]["images"]
                check(info["wells"][0]["positions"] == len(images), f"{sub}/{ex}: positions {info['wells'][0]}")
    p = subprocess.run([BIN, "info", os.path.join(ozm, "v04", "hcs_example.ome.zarr"), "--json"],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"hcs_example.ome.zarr: {p.stderr.strip()}")
    if p.returncode == 0:
        info = json.loads(p.stdout)
        img = info["image"]
        check(info["format"] == "0.4" and info["nwells"] == 1 and img["axes"] == "czyx", f"hcs_example: {info}")
        check(img["levels"][0].get("shape") == [1, 2, 2160, 5120] and len(img["levels"]) == 5,
              f"hcs_example levels: {img['levels'][0]}")
        check(img["tile_shape"] == [2160, 5120] and img["channels"][0]["label"] == "DAPI", "hcs_example image")

    finish()


if __name__ == "__main__":
    main()
