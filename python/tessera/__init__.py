from tessera._C import *  # noqa
