"""The litellm extra is optional: leastload never imports LiteLLM, and the integration says
which extra to install when LiteLLM is missing (these run with or without LiteLLM installed)."""
import subprocess
import sys


def test_import_leastload_never_imports_litellm():
    code = ("import sys, leastload, leastload.integrations, leastload.integrations.httpx; "
            "assert 'litellm' not in sys.modules, 'litellm imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_integration_without_litellm_names_the_extra():
    code = ("import sys; sys.modules['litellm'] = None  # as if not installed\n"
            "try:\n"
            "    import leastload.integrations.litellm\n"
            "except ImportError as exc:\n"
            "    assert 'pip install leastload[litellm]' in str(exc), exc\n"
            "else:\n"
            "    raise SystemExit('imported without LiteLLM')\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
