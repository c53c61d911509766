"""Every file format commlens reads or writes: raw launch files, netCDF with the CF conventions, and the
outputs of other benchmark suites."""
